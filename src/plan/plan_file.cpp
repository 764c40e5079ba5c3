#include "kiln/plan/plan_file.hpp"

#include "kiln/base/error.hpp"
#include "kiln/io/atomic_file.hpp"
#include "kiln/io/hdf5.hpp"
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

h5::Handle templateType() {
    h5::Handle t(KILN_H5(H5Tcreate(H5T_COMPOUND, sizeof(TemplateRow)), "plan"));
    KILN_H5(H5Tinsert(t, "nodes", HOFFSET(TemplateRow, nodes), H5T_NATIVE_UINT32), "plan");
    KILN_H5(H5Tinsert(t, "stages", HOFFSET(TemplateRow, stages), H5T_NATIVE_UINT32), "plan");
    KILN_H5(H5Tinsert(t, "ranks_per_node", HOFFSET(TemplateRow, ranksPerNode), H5T_NATIVE_UINT32), "plan");
    KILN_H5(H5Tinsert(t, "stage_width", HOFFSET(TemplateRow, width), H5T_NATIVE_UINT32), "plan");
    KILN_H5(H5Tinsert(t, "reference_microbatches", HOFFSET(TemplateRow, referenceMicrobatches), H5T_NATIVE_UINT64), "plan");
    KILN_H5(H5Tinsert(t, "bottleneck_s", HOFFSET(TemplateRow, bottleneck), H5T_NATIVE_DOUBLE), "plan");
    KILN_H5(H5Tinsert(t, "fill_drain_s", HOFFSET(TemplateRow, fillDrain), H5T_NATIVE_DOUBLE), "plan");
    KILN_H5(H5Tinsert(t, "sync_s", HOFFSET(TemplateRow, sync), H5T_NATIVE_DOUBLE), "plan");
    return t;
}

h5::Handle stageType() {
    h5::Handle t(KILN_H5(H5Tcreate(H5T_COMPOUND, sizeof(StageRow)), "plan"));
    KILN_H5(H5Tinsert(t, "template_nodes", HOFFSET(StageRow, templateNodes), H5T_NATIVE_UINT32), "plan");
    KILN_H5(H5Tinsert(t, "template_width", HOFFSET(StageRow, templateWidth), H5T_NATIVE_UINT32), "plan");
    KILN_H5(H5Tinsert(t, "stage", HOFFSET(StageRow, stage), H5T_NATIVE_UINT32), "plan");
    KILN_H5(H5Tinsert(t, "first_layer", HOFFSET(StageRow, firstLayer), H5T_NATIVE_UINT32), "plan");
    KILN_H5(H5Tinsert(t, "end_layer", HOFFSET(StageRow, endLayer), H5T_NATIVE_UINT32), "plan");
    KILN_H5(H5Tinsert(t, "time_s", HOFFSET(StageRow, time), H5T_NATIVE_DOUBLE), "plan");
    KILN_H5(H5Tinsert(t, "sync_s", HOFFSET(StageRow, sync), H5T_NATIVE_DOUBLE), "plan");
    KILN_H5(H5Tinsert(t, "memory_bytes", HOFFSET(StageRow, memory), H5T_NATIVE_DOUBLE), "plan");
    KILN_H5(H5Tinsert(t, "param_bytes", HOFFSET(StageRow, paramBytes), H5T_NATIVE_DOUBLE), "plan");
    KILN_H5(H5Tinsert(t, "activation_bytes", HOFFSET(StageRow, activationBytes), H5T_NATIVE_DOUBLE), "plan");
    KILN_H5(H5Tinsert(t, "update_bytes", HOFFSET(StageRow, updateBytes), H5T_NATIVE_DOUBLE), "plan");
    KILN_H5(H5Tinsert(t, "runtime_bytes", HOFFSET(StageRow, runtimeBytes), H5T_NATIVE_DOUBLE), "plan");
    KILN_H5(H5Tinsert(t, "recompute", HOFFSET(StageRow, recompute), H5T_NATIVE_UINT32), "plan");
    return t;
}

h5::Handle pipelineType() {
    h5::Handle t(KILN_H5(H5Tcreate(H5T_COMPOUND, sizeof(PipelineRow)), "plan"));
    KILN_H5(H5Tinsert(t, "nodes", HOFFSET(PipelineRow, nodes), H5T_NATIVE_UINT32), "plan");
    KILN_H5(H5Tinsert(t, "stage_width", HOFFSET(PipelineRow, width), H5T_NATIVE_UINT32), "plan");
    KILN_H5(H5Tinsert(t, "microbatches", HOFFSET(PipelineRow, microbatches), H5T_NATIVE_UINT64), "plan");
    KILN_H5(H5Tinsert(t, "step_time_s", HOFFSET(PipelineRow, stepTime), H5T_NATIVE_DOUBLE), "plan");
    return t;
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
        h5::Handle file(KILN_H5(H5Fcreate(temporary.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), path));
        h5::writeAttribute(file, "format", std::string("kiln-plan"));
        h5::writeAttribute(file, "format_version", std::int64_t{kVersion});
        h5::writeAttribute(file, "nodes", std::uint64_t{nodes});
        h5::writeAttribute(file, "f", std::uint64_t{f});
        h5::writeAttribute(file, "global_microbatches", globalMicrobatches);
        h5::writeAttribute(file, "min_nodes", std::uint64_t{set.minNodes});
        h5::writeAttribute(file, "max_nodes", std::uint64_t{set.maxNodes});
        h5::Handle scalarSpace(KILN_H5(H5Screate(H5S_SCALAR), path));
        h5::Handle memory(KILN_H5(H5Acreate2(file, "memory_per_rank_bytes", H5T_IEEE_F64LE, scalarSpace, H5P_DEFAULT, H5P_DEFAULT), path));
        KILN_H5(H5Awrite(memory, H5T_NATIVE_DOUBLE, &set.memoryPerRank), path);
        h5::writeRecords(file, "templates", templateType(), templates, path);
        h5::writeRecords(file, "stages", stageType(), stages, path);
        auto instantiation = h5::writeRecords(file, "instantiation", pipelineType(), pipelines, path);
        h5::writeAttribute(instantiation, "nodes_used", std::uint64_t{inst.nodesUsed});
        h5::writeAttribute(instantiation, "nodes_idle", std::uint64_t{inst.nodesIdle});
        h5::Handle scalar(KILN_H5(H5Screate(H5S_SCALAR), path));
        h5::Handle attr(KILN_H5(H5Acreate2(instantiation, "step_time_s", H5T_IEEE_F64LE, scalar, H5P_DEFAULT, H5P_DEFAULT), path));
        KILN_H5(H5Awrite(attr, H5T_NATIVE_DOUBLE, &inst.stepTime), path);
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
    {
        h5::Handle memory(KILN_H5(H5Aopen(file, "memory_per_rank_bytes", H5P_DEFAULT), path));
        KILN_H5(H5Aread(memory, H5T_NATIVE_DOUBLE, &set.memoryPerRank), path);
    }
    set.minNodes = static_cast<std::uint32_t>(h5::readUintAttribute(file, "min_nodes", path));
    set.maxNodes = static_cast<std::uint32_t>(h5::readUintAttribute(file, "max_nodes", path));
    const auto templates = h5::readRecords<TemplateRow>(file, "templates", templateType(), path);
    const auto stages = h5::readRecords<StageRow>(file, "stages", stageType(), path);
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
    for (const auto& p : h5::readRecords<PipelineRow>(file, "instantiation", pipelineType(), path)) {
        inst.pipelines.push_back({p.nodes, p.microbatches, p.stepTime, p.width});
        inst.nodesUsed += p.nodes;
        inst.stepTime = std::max(inst.stepTime, p.stepTime);
    }
    inst.nodesIdle = static_cast<std::uint32_t>(h5::readUintAttribute(file, "nodes", path)) - inst.nodesUsed;
}

}  // namespace kiln::plan
