#include "kiln/plan/plan_file.hpp"

#include "kiln/base/error.hpp"
#include "kiln/io/atomic_file.hpp"
#include "kiln/io/hdf5.hpp"
#include "kiln/io/hdf5_array.hpp"
#include "kiln/io/hdf5_record.hpp"
#include "kiln/io/parallel_file.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace kiln::plan {

namespace h5 = io::h5;

namespace {

// 5: each stage says whether it recomputes (train.recompute = full or auto).
constexpr std::int64_t kVersion = 5;

struct TemplateRow {
    std::uint32_t nodes, stages, ranksPerNode, width;
    std::uint64_t referenceMicrobatches;
    double bottleneck, fillDrain, sync;
};
struct StageRow {
    std::uint32_t templateNodes, templateWidth, stage, firstLayer, endLayer;
    double time, sync, memory, paramBytes, activationBytes, updateBytes, runtimeBytes;
    std::uint32_t recompute;  // 1: its layers recomputed in full in backward
};
struct PipelineRow {
    std::uint32_t nodes, width;
    std::uint64_t microbatches;
    double stepTime;
};

const h5::Record<TemplateRow>& templateRecord() {
    static const auto record = h5::Record<TemplateRow>()
                                   .field("nodes", &TemplateRow::nodes)
                                   .field("stages", &TemplateRow::stages)
                                   .field("ranks_per_node", &TemplateRow::ranksPerNode)
                                   .field("stage_width", &TemplateRow::width)
                                   .field("reference_microbatches", &TemplateRow::referenceMicrobatches)
                                   .field("bottleneck_s", &TemplateRow::bottleneck)
                                   .field("fill_drain_s", &TemplateRow::fillDrain)
                                   .field("sync_s", &TemplateRow::sync);
    return record;
}

const h5::Record<StageRow>& stageRecord() {
    static const auto record = h5::Record<StageRow>()
                                   .field("template_nodes", &StageRow::templateNodes)
                                   .field("template_width", &StageRow::templateWidth)
                                   .field("stage", &StageRow::stage)
                                   .field("first_layer", &StageRow::firstLayer)
                                   .field("end_layer", &StageRow::endLayer)
                                   .field("time_s", &StageRow::time)
                                   .field("sync_s", &StageRow::sync)
                                   .field("memory_bytes", &StageRow::memory)
                                   .field("param_bytes", &StageRow::paramBytes)
                                   .field("activation_bytes", &StageRow::activationBytes)
                                   .field("update_bytes", &StageRow::updateBytes)
                                   .field("runtime_bytes", &StageRow::runtimeBytes)
                                   .field("recompute", &StageRow::recompute);
    return record;
}

const h5::Record<PipelineRow>& pipelineRecord() {
    static const auto record = h5::Record<PipelineRow>()
                                   .field("nodes", &PipelineRow::nodes)
                                   .field("stage_width", &PipelineRow::width)
                                   .field("microbatches", &PipelineRow::microbatches)
                                   .field("step_time_s", &PipelineRow::stepTime);
    return record;
}

}  // namespace

void writePlan(const std::string& path, const TemplateSet& set, const Instantiation& inst, std::uint32_t nodes,
               std::uint32_t f, std::uint64_t globalMicrobatches) {
    h5::LibraryLock lock(h5::libraryMutex());
    h5::quietErrors();
    std::vector<TemplateRow> templates;
    std::vector<StageRow> stages;
    const auto add = [&](const PipelineTemplate& t, std::uint32_t n) {
        if (t.nodes == 0) {
            templates.push_back({n, 0, 0, 0, 0, 0.0, 0.0, 0.0});
            return;
        }
        templates.push_back({n, static_cast<std::uint32_t>(t.stages.size()), t.ranksPerNode, t.width, t.referenceMicrobatches,
                             t.bottleneck(), t.latency(), t.sync()});
        for (std::uint32_t s = 0; s < t.stages.size(); ++s) {
            const auto& st = t.stages[s];
            stages.push_back({n, t.width, s, st.firstLayer, st.endLayer, st.time, st.sync, st.memory, st.paramBytes,
                              st.activationBytes, st.updateBytes, st.runtimeBytes, st.recompute ? 1u : 0u});
        }
    };
    // The best template of every node count, then the other widths the instantiation pins.
    for (std::size_t i = 0; i < set.templates.size(); ++i) add(set.templates[i], static_cast<std::uint32_t>(set.minNodes + i));
    std::vector<const PipelineTemplate*> pinned;
    for (const auto& p : inst.pipelines) {
        const PipelineTemplate* t = p.templateIn(set);
        if (t && t != set.forNodes(p.nodes) && std::find(pinned.begin(), pinned.end(), t) == pinned.end()) {
            pinned.push_back(t);
            add(*t, p.nodes);
        }
    }
    std::vector<PipelineRow> pipelines;
    for (const auto& p : inst.pipelines) pipelines.push_back({p.nodes, p.width, p.microbatches, p.stepTime});

    const std::string temporary = io::temporarySibling(path).string();
    {
        h5::Handle file = h5::createFile(temporary, path);
        h5::writeAttribute(file, "format", std::string("kiln-plan"));
        h5::writeAttribute(file, "format_version", std::int64_t{kVersion});
        h5::writeAttribute(file, "nodes", std::uint64_t{nodes});
        h5::writeAttribute(file, "f", std::uint64_t{f});
        h5::writeAttribute(file, "global_microbatches", globalMicrobatches);
        h5::writeAttribute(file, "min_nodes", std::uint64_t{set.minNodes});
        h5::writeAttribute(file, "max_nodes", std::uint64_t{set.maxNodes});
        h5::writeAttribute(file, "memory_per_rank_bytes", set.memoryPerRank);
        h5::writeRecords(file, "templates", templateRecord(), templates, path);
        h5::writeRecords(file, "stages", stageRecord(), stages, path);
        auto instantiation = h5::writeRecords(file, "instantiation", pipelineRecord(), pipelines, path);
        h5::writeAttribute(instantiation, "nodes_used", std::uint64_t{inst.nodesUsed});
        h5::writeAttribute(instantiation, "nodes_idle", std::uint64_t{inst.nodesIdle});
        h5::writeAttribute(instantiation, "step_time_s", inst.stepTime);
    }
    io::commitTemporary(temporary, path);
}

void readPlan(const std::string& path, TemplateSet& set, Instantiation& inst) {
    h5::Handle file = io::openForReading(path, "plan");
    h5::LibraryLock lock(h5::libraryMutex());
    if (!h5::hasAttribute(file, "format") || h5::readStringAttribute(file, "format", path) != "kiln-plan")
        throw InputError(fmt::format("{}: not a kiln plan (write one with kiln plan DECK --out FILE)", path));
    if (h5::readIntAttribute(file, "format_version", path) != kVersion)
        throw InputError(fmt::format("{}: plan format version {}, this kiln reads {} (which stages recompute their "
                                     "layers); write it again with kiln plan DECK --out FILE",
                                     path, h5::readIntAttribute(file, "format_version", path), kVersion));
    set = TemplateSet{};
    set.memoryPerRank = h5::readRealAttribute(file, "memory_per_rank_bytes", path);
    set.minNodes = static_cast<std::uint32_t>(h5::readUintAttribute(file, "min_nodes", path));
    set.maxNodes = static_cast<std::uint32_t>(h5::readUintAttribute(file, "max_nodes", path));
    const auto templates = h5::readRecords<TemplateRow>(file, "templates", templateRecord(), path);
    const auto stages = h5::readRecords<StageRow>(file, "stages", stageRecord(), path);
    for (const auto& row : templates) {
        PipelineTemplate t;
        if (row.stages > 0) {
            t.nodes = row.nodes;
            t.ranksPerNode = row.ranksPerNode;
            t.width = row.width;
            t.referenceMicrobatches = row.referenceMicrobatches;
            for (const auto& s : stages)
                if (s.templateNodes == row.nodes && s.templateWidth == row.width)
                    t.stages.push_back({s.firstLayer, s.endLayer, s.time, s.sync, s.memory, s.paramBytes, s.activationBytes, 0.0, 0.0,
                                        s.updateBytes, s.runtimeBytes, s.recompute != 0});
        }
        // One row per node count (the best), then the pinned other widths.
        if (set.templates.size() + set.minNodes <= row.nodes) {
            set.templates.push_back(std::move(t));
        } else {
            set.alternatives.push_back(std::move(t));
        }
    }
    inst = Instantiation{};
    for (const auto& p : h5::readRecords<PipelineRow>(file, "instantiation", pipelineRecord(), path)) {
        inst.pipelines.push_back({p.nodes, p.microbatches, p.stepTime, p.width});
        inst.nodesUsed += p.nodes;
        inst.stepTime = std::max(inst.stepTime, p.stepTime);
    }
    inst.nodesIdle = static_cast<std::uint32_t>(h5::readUintAttribute(file, "nodes", path)) - inst.nodesUsed;
}

}  // namespace kiln::plan
