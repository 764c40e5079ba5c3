// The plan against what runs: the speed monitor's verdicts carried out at a
// step boundary, and the memory the ranks used against the planner's.
#include "trainer_state.hpp"

#include "kiln/base/error.hpp"
#include "kiln/base/log.hpp"
#include "kiln/base/resident_memory.hpp"
#include "kiln/base/startup_clock.hpp"
#include "kiln/comm/mpi_check.hpp"
#include "kiln/model/cpu_allocations.hpp"
#include "kiln/model/device_memory.hpp"
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

void Trainer::State::reportStartup(std::uint64_t step) {
    const auto phases = base::startupPhases();
    std::vector<double> seconds;
    for (const auto& [name, s] : phases) seconds.push_back(s);
    try {
        KILN_MPI(MPI_Allreduce(MPI_IN_PLACE, seconds.data(), static_cast<int>(seconds.size()), MPI_DOUBLE, MPI_MAX,
                               world.control()));
    } catch (const ProcFailedError& e) {
        log::detail("a rank failed during the start-up report: {}", e.what());
        abandonStep();  // every survivor meets it in the next step and recovers
        return;
    }
    if (!report.holds()) return;
    std::vector<std::string> parts;
    double total = 0.0;
    for (std::size_t k = 0; k < phases.size(); ++k) {
        parts.push_back(fmt::format("{} {:.2f}", phases[k].first, seconds[k]));
        total += seconds[k];
    }
    const std::string detail = fmt::format("{} ranks, seconds on the slowest rank per phase: {}; {:.2f} s in all (the "
                                           "phases' maxima added)",
                                           world.size(), fmt::join(parts, ", "), total);
    log::info("  start-up   {}", detail);
    report.event(step, "startup", detail);
}

void Trainer::State::markMemoryBaseline() {
    residentAtStart = base::residentBytes();
    allocatedAtStart = model::cpuAllocatedBytes();
    heldAtStart = model::cpuHeldBytes();
    model::resetCpuPeak();
    model::resetDeviceMemoryPeak(device.is_cuda() ? device.index() : -1);
}

void Trainer::State::reportMemory(std::uint64_t step) {
    // Planned: the stage's weights, gradients, moments, activations in
    // flight, one layer's temporaries and the runtime the profile measured.
    double planned = 0.0;
    const auto& layout = parallel->layout();
    const auto& role = parallel->role();
    if (!role.idle()) {
        const auto& p = layout.pipelines[static_cast<std::size_t>(role.pipeline)];
        if (const auto* t = p.share().templateIn(plan.templates); t && role.stage < t->stages.size())
            planned = t->stages[role.stage].memoryWith(std::min<std::uint64_t>(role.stages - role.stage, p.microbatches));
    }
    // Measured, peaks since the model was built. On the CPU three ways:
    // libtorch's live bytes (what the layers need), the pages its tensors
    // took from the system (kept blocks included), and the resident set
    // (everything: what the plan is held to). On a GPU the device
    // allocator's peak is held to the plan (its reserved bytes beside it).
    const std::uint64_t peak = base::peakResidentBytes();
    const auto gpu = model::deviceMemoryPeak(device.is_cuda() ? device.index() : -1);
    enum { kCounted, kHeld, kResident, kDevice, kReserved, kPlanned, kFields };
    const double mine[kFields] = {double(std::max<std::int64_t>(model::cpuPeakAllocatedBytes() - allocatedAtStart, 0)),
                                  double(std::max<std::int64_t>(model::cpuPeakHeldBytes() - heldAtStart, 0)),
                                  peak > residentAtStart ? double(peak - residentAtStart) : 0.0,
                                  double(gpu.allocated), double(gpu.reserved), planned};
    std::vector<double> all(kFields * static_cast<std::size_t>(world.size()));
    KILN_MPI(MPI_Allgather(mine, kFields, MPI_DOUBLE, all.data(), kFields, MPI_DOUBLE, world.control()));
    if (!report.holds()) return;
    const int measure = gpu.known ? kDevice : kResident;
    int worst = -1;
    double worstError = -1.0, sum[kFields] = {};
    for (int r = 0; r < world.size(); ++r) {
        const double* row = &all[kFields * static_cast<std::size_t>(r)];
        if (row[kPlanned] <= 0.0) continue;  // idle: nothing planned
        for (int k = 0; k < kFields; ++k) sum[k] += row[k];
        if (const double error = std::abs(row[measure] / row[kPlanned] - 1.0); error > worstError) {
            worstError = error;
            worst = r;
        }
    }
    if (worst < 0) return;
    const double* row = &all[kFields * static_cast<std::size_t>(worst)];
    const std::string measured =
        gpu.known ? fmt::format("the GPU allocator's peak {:.3f} GB ({:.2f}x), reserved {:.3f} GB; host: resident growth "
                                "{:.3f} GB",
                                sum[kDevice] / 1e9, sum[kDevice] / sum[kPlanned], sum[kReserved] / 1e9, sum[kResident] / 1e9)
                  : fmt::format("resident growth {:.3f} GB ({:.2f}x), libtorch's pages {:.3f} GB, its live bytes {:.3f} GB "
                                "({:.2f}x)",
                                sum[kResident] / 1e9, sum[kResident] / sum[kPlanned], sum[kHeld] / 1e9,
                                sum[kCounted] / 1e9, sum[kCounted] / sum[kPlanned]);
    const std::string detail = fmt::format(
        "peak since the model was built, against the planner's stage memory, over the ranks with a stage: {}, planned "
        "{:.3f} GB; furthest off start-up rank {}: {:.3f} GB {}, {:.3f} GB planned ({:.2f}x)",
        measured, sum[kPlanned] / 1e9, world.members()[static_cast<std::size_t>(worst)], row[measure] / 1e9,
        gpu.known ? "on the GPU" : "resident", row[kPlanned] / 1e9, row[measure] / row[kPlanned]);
    log::info("  memory     {}", detail);
    report.event(step, "memory", detail);
}

}  // namespace kiln::train
