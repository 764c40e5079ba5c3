// The plan against what runs: the speed monitor's verdicts carried out at a
// step boundary (a rebalance, a straggler retired or taken back), who probes.
#include "trainer_state.hpp"

#include "kiln/base/error.hpp"
#include "kiln/base/log.hpp"
#include "kiln/comm/mpi_check.hpp"
#include "kiln/comm/ulfm.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>

namespace kiln::train {

Trainer::State::Recovery Trainer::State::followSpeeds(std::uint64_t step, const Attempt& done) {
    const plan::SpeedVerdict verdict =
        speeds->observe(parallel->layout(), plan, done.compute, static_cast<std::uint32_t>(membership.liveCount()),
                        membership.tolerance());
    if (!verdict.note.empty()) {
        report.notice(step, "speed", verdict.note);
    }
    switch (verdict.action) {
        case plan::SpeedVerdict::Action::None: break;
        case plan::SpeedVerdict::Action::Rebalance:
            // Nothing moves but the loader's slice: every rank took the same verdict from the same times.
            parallel->redistribute(verdict.instantiation);
            // Agreed before the next step reads by it (a rank that split otherwise would wait for samples never sent).
            if (const auto outcome = atBoundary(step, "the batch was split again",
                                                [&] {
                                                    parallel->requireSameLayout(world);
                                                    return Recovery::Continue;
                                                });
                outcome != Recovery::Continue)
                return outcome;
            sliceLoader();
            report.notice(step, "rebalance", fmt::format("before step {}: {}", step, verdict.detail));
            announceLayout(step, false, fmt::format("rebalanced by measured speed before step {}", step),
                           /*newLayout=*/false);
            return Recovery::Continue;
        case plan::SpeedVerdict::Action::Retire:
            return atBoundary(step, fmt::format("straggler node {} was retired", verdict.node).c_str(),
                              [&] { return retireStraggler(step, verdict.node, verdict.detail); });
    }
    // A retired straggler that recovered: its probes, like the times above, are the same on every rank.
    if (membership.stragglers().empty()) return Recovery::Continue;
    std::vector<int> nodeOfRank;
    for (int r : world.members()) nodeOfRank.push_back(world.nodeOfOriginal(r));
    const auto back = speeds->recovered(done.probe, nodeOfRank, referenceNode(), plan.cluster.ranksPerNode);
    if (back.node < 0) return Recovery::Continue;
    const std::string why = fmt::format("its ranks ran one block at {:.2f}x the time of reference node {}'s (median of "
                                        "{} steps), within straggler.return_at = {}",
                                        back.slowdown, referenceNode(), speeds->policy().retireSteps,
                                        speeds->policy().returnAt);
    return atBoundary(step, fmt::format("straggler node {} was taken back", back.node).c_str(),
                      [&] { return takeBackStraggler(step, back.node, why); });
}

Trainer::State::Recovery Trainer::State::takeBackStraggler(std::uint64_t step, int node, const std::string& why) {
    const auto t0 = Clock::now();
    // Published first, as for an admission: a regroup changes who holds what.
    if (checkpoints->pending()) checkpoints->complete(world.control());
    membership.takeBack(node);
    const std::string cause = fmt::format("straggler node {} came back before step {}", node, step);
    const std::string regrouped = settleOnMoreNodes(step, cause);
    const std::string detail = fmt::format("before step {}: node {} recovered: {}; {} in {:.1f} ms", step, node, why,
                                           regrouped.empty() ? std::string("it waits as a spare") : regrouped,
                                           1e3 * since(t0));
    report.notice(step, "return", detail);
    return Recovery::Continue;
}

void Trainer::State::updateProbes() {
    membership.forgetBrokenStragglers(plan.cluster.ranksPerNode);
    const auto& stragglers = membership.stragglers();
    const bool probes = speeds->policy().returnAt > 0.0 && !stragglers.empty() &&
                        (stragglers.count(world.node()) || world.node() == referenceNode());
    probesBeside = probes && stragglers.count(world.node()) > 0;
    if (!probes) {
        probe.reset();
    } else if (!probe) {
        probe = std::make_unique<StragglerProbe>(modelConfig, config.microBatch, device, config.deviceDeadline());
    }
}

void Trainer::State::reportSpeeds(std::uint64_t step) {
    const plan::MeasuredSpeeds m = speeds->measured(parallel->layout());
    if (m.ratio <= 0.0 || !report.holds()) return;
    std::vector<std::string> pipelines;
    for (std::size_t p = 0; p < m.pipelineSlowdown.size(); ++p)
        pipelines.push_back(m.pipelineSlowdown[p] > 0.0 ? fmt::format("{:.2f}", m.pipelineSlowdown[p]) : "-");
    std::pair<int, double> slowest{-1, 0.0};
    for (const auto& node : m.nodeSlowdown)
        if (node.second > slowest.second) slowest = node;
    // Why a benched straggler has not come back: its probes against the reference's.
    std::vector<std::string> benchedNodes;
    for (const auto& [node, slowdown] : speeds->probeSlowdowns())
        benchedNodes.push_back(fmt::format("node {} at {:.2f}x", node, slowdown));
    const std::string detail = fmt::format(
        "compute {:.2f}x the plan's stage times (median rank, last steps of layout {}); pipelines' slowdowns (slowest "
        "stage against the planned bottleneck, scaled by the median rank) {}; slowest node {} at {:.2f}x{}",
        m.ratio, parallel->layout().describe(), fmt::join(pipelines, ", "), slowest.first, slowest.second,
        benchedNodes.empty() ? std::string()
                             : fmt::format("; benched stragglers' probes against reference node {}'s: {}",
                                           referenceNode(), fmt::join(benchedNodes, ", ")));
    log::info("  speeds     {}", detail);
    report.event(step, "speeds", detail);
}

}  // namespace kiln::train
