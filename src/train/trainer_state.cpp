#include "trainer_state.hpp"

#include "kiln/base/log.hpp"
#include "kiln/comm/mpi_check.hpp"
#include "kiln/io/fence.hpp"
#include "kiln/model/cpu_allocations.hpp"
#include "kiln/plan/regroup.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <set>

namespace kiln::train {
namespace {

std::vector<io::TemplateStageRecord> templateRecords(const plan::TemplateSet& set) {
    std::vector<io::TemplateStageRecord> rows;
    for (const auto& t : set.templates) {
        if (t.nodes == 0) continue;
        for (std::uint32_t s = 0; s < t.stages.size(); ++s) {
            const auto& st = t.stages[s];
            rows.push_back({t.nodes, s, s / t.stagesPerNode(), s % t.stagesPerNode() * t.width, st.firstLayer, st.endLayer, st.time,
                            st.sync, st.memory});
        }
    }
    return rows;
}

io::InstantiationRecord instantiationRecord(const plan::Layout& layout, const std::vector<int>& members,
                                            std::uint64_t step, bool pinned, std::uint32_t tolerance,
                                            std::uint32_t spares) {
    io::InstantiationRecord r;
    r.step = step;
    r.tolerance = tolerance;
    r.spares = spares;
    r.pipelines = static_cast<std::uint32_t>(layout.pipelines.size());
    r.nodesIdle = static_cast<std::uint32_t>(layout.idleNodes.size());
    r.pinned = pinned ? 1 : 0;
    std::vector<std::string> ranks;
    for (const auto& p : layout.pipelines) {
        r.nodesUsed += p.nodes;
        r.predictedStepTime = std::max(r.predictedStepTime, p.predictedStepTime);
        std::vector<int> startup;
        for (int rank : p.ranks) startup.push_back(members[static_cast<std::size_t>(rank)]);
        ranks.push_back(fmt::format("{}", fmt::join(startup, ",")));
    }
    const auto layoutText = plan::sharesOf(layout), ranksText = fmt::format("{}", fmt::join(ranks, "|"));
    io::fitText(r.layout, layoutText);
    io::fitText(r.ranks, ranksText);
    return r;
}

}  // namespace

void Trainer::State::describeReport() {
    std::vector<std::string> names;
    for (const auto& src : spec.sources) names.push_back(src.name);
    std::string boardDir;
    if (deck.flag("run.tensorboard"))
        boardDir = deck.text("run.tensorboard_dir").empty() ? (runDir / "tensorboard").string()
                                                             : deck.text("run.tensorboard_dir");
    report.describeRun(runDir / "diag.h5", deck.resolvedText(), std::move(names), templateRecords(plan.templates),
                       {modelConfig.experts.any() ? modelConfig.blocks : 0, modelConfig.experts.count},
                       std::move(boardDir));
}

plan::Layout Trainer::State::layoutFor(const plan::Instantiation& inst) const {
    const LiveNodes nodes = membership.live();
    return plan::placeInstantiation(plan.templates, inst, nodes.ids, nodes.ranks, config.microBatch, spec.globalBatch);
}

plan::Running Trainer::State::running() const {
    const LiveNodes nodes = membership.live();
    const std::set<int> live(nodes.ids.begin(), nodes.ids.end());
    return plan::runningOf(parallel->layout(), [&live](int node) { return live.count(node) > 0; });
}

plan::Regroup Trainer::State::regroupNow(std::uint64_t step) const {
    const auto liveNodes = static_cast<std::uint32_t>(membership.liveCount());
    plan::Regroup next = plan::regroup(plan, liveNodes, running(), plan::regroup(plan, liveNodes));
    if (next.replanned) log::info("  step {}: {}", step, next.replan);
    return next;
}

plan::Layout Trainer::State::layoutFor(const plan::Regroup& next) const {
    const LiveNodes nodes = membership.live();
    const auto& inst = next.instantiation;
    std::vector<double> layerBytes;
    for (std::uint32_t l = 0; l < modelConfig.numLayers(); ++l)
        layerBytes.push_back(12.0 * double(modelConfig.parametersOf(l)));  // weights and two moments, fp32
    auto keep = plan::holdingsOfNodes(parallel->layout(), membership.layoutRanks(nodes), std::move(layerBytes));
    const std::set<int> live(nodes.ids.begin(), nodes.ids.end());
    keep.keptNodes = plan::pinnedNodes(parallel->layout(), next, [&live](int node) { return live.count(node) > 0; });
    return plan::placeInstantiation(plan.templates, inst, nodes.ids, nodes.ranks, config.microBatch, spec.globalBatch,
                                    &keep);
}

std::pair<std::uint64_t, std::uint64_t> Trainer::State::loaderSlice() const {
    const auto& layout = parallel->layout();
    const auto& role = parallel->role();
    if (role.idle() || !(role.first() || role.last())) return {0, 0};
    const auto& p = layout.pipelines[static_cast<std::size_t>(role.pipeline)];
    const std::uint64_t begin = layout.microbatchBegin(p.firstMicrobatch);
    return {begin, layout.microbatchBegin(p.firstMicrobatch + p.microbatches) - begin};
}

void Trainer::State::sliceLoader() {
    const auto [first, count] = loaderSlice();
    loader->setSlice(first, count);
}

std::unique_ptr<data::DataLoader> Trainer::State::openLoader(const data::LoaderSpec& of,
                                                             std::shared_ptr<data::Corpus> from,
                                                             const data::Cursor& at) const {
    auto opened = std::make_unique<data::DataLoader>(of, std::move(from), at);
    const auto [first, count] = loaderSlice();
    opened->setSlice(first, count);
    return opened;
}

void Trainer::State::announceLayout(std::uint64_t step, bool pinned, const std::string& why, bool newLayout) {
    if (newLayout && speeds) {
        speeds->reset();
        updateProbes();
    }
    // The layer transfers' buffers are not a step's sizes: given back now,
    // not held through the next step.
    if (newLayout) model::releaseCpuCache();
    const auto& layout = parallel->layout();
    const auto nodes = layout.idleNodes.size() + [&] {
        std::size_t n = 0;
        for (const auto& p : layout.pipelines) n += p.nodes;
        return n;
    }();
    const std::uint32_t tolerance = membership.tolerance(), spares = membership.spares();
    const std::size_t idle = layout.idleNodes.size() - std::min<std::size_t>(spares, layout.idleNodes.size());
    std::string spare;
    if (idle > 0) spare += fmt::format(", {} idle", idle);
    if (spares > 0) spare += fmt::format(", {} spare", spares);
    const std::set<int> benchedNodes = membership.benchedNodes();
    const std::string benched =
        benchedNodes.empty() ? std::string()
                             : fmt::format("; {} retired node{} benched (members without work until the end)",
                                           benchedNodes.size(), benchedNodes.size() == 1 ? "" : "s");
    log::info("  layout     {} on {} node{}{}: {}; tolerates {} node failure{} at once{}", layout.describe(), nodes,
              nodes == 1 ? "" : "s", spare.empty() ? "" : fmt::format(" ({})", spare.substr(2)), why, tolerance,
              tolerance == 1 ? "" : "s", benched);
    for (std::size_t p = 0; p < layout.pipelines.size(); ++p) {
        const auto& pipeline = layout.pipelines[p];
        std::vector<std::string> stages;
        for (std::uint32_t s = 0; s < pipeline.stages(); ++s) {
            std::vector<int> startup;
            for (int rank : pipeline.stageRanks(s)) startup.push_back(world.members()[static_cast<std::size_t>(rank)]);
            stages.push_back(fmt::format("rank{} {}: {}-{}", startup.size() == 1 ? "" : "s", fmt::join(startup, ","),
                                         pipeline.cuts[s], pipeline.cuts[s + 1] - 1));
        }
        log::info("    pipeline {} {}  {}", p,
                  pipeline.microbatches == 0
                      ? std::string("no microbatches (a standby replica)")
                      : fmt::format("microbatches {}-{}", pipeline.firstMicrobatch,
                                    pipeline.firstMicrobatch + pipeline.microbatches - 1),
                  fmt::join(stages, " | "));
    }
    report.instantiation(instantiationRecord(layout, world.members(), step, pinned, tolerance, spares));
}

CheckpointManager::Source Trainer::State::checkpointContents(LayerHolders holders) const {
    return {&parallel->model(), &parallel->optimizer(), std::move(holders), loader->cursor(), context, deck.resolvedText(),
            config.decaySteps};
}

void Trainer::State::reportCheckpoint(const CheckpointWrite& done, bool background) {
    const std::string how = RunCheckpoints::describe(done, background);
    log::info("  checkpoint {} written {}", done.path.string(), how);
    report.event(done.step, "checkpoint", fmt::format("{} {}", done.path.filename().string(), how));
}

}  // namespace kiln::train
