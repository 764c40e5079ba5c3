// Recovery from node failures, on every survivor: regroup, migrate, or stop beyond f.
#include "trainer_state.hpp"

#include "kiln/base/error.hpp"
#include "kiln/base/log.hpp"
#include "kiln/comm/mpi_check.hpp"
#include "kiln/comm/ulfm.hpp"
#include "kiln/fault/recovery.hpp"
#include "kiln/io/fence.hpp"
#include "kiln/plan/regroup.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cstring>

namespace kiln::train {
namespace {

// For each layer of `layout`, the ranks (of the world's control
// communicator) of the first stage holding it whose ranks all live: the
// writers of its shards; empty when no stage is whole any more.
std::vector<std::vector<int>> liveWriters(const plan::Layout& layout, const std::vector<int>& layoutMembers,
                                          const std::vector<int>& members) {
    std::vector<std::vector<int>> out(layout.layers);
    for (const auto& segment : layout.segments) {
        std::vector<int> chosen;
        std::size_t first = 0;
        for (std::uint32_t w : segment.widths) {
            std::vector<int> stage;
            for (std::size_t k = first; k < first + w; ++k) {
                const int startup = layoutMembers[static_cast<std::size_t>(segment.holders[k])];
                if (const auto it = std::find(members.begin(), members.end(), startup); it != members.end())
                    stage.push_back(static_cast<int>(it - members.begin()));
            }
            first += w;
            if (stage.size() == w) {
                chosen = stage;
                break;
            }
        }
        for (std::uint32_t l = segment.firstLayer; l < segment.endLayer; ++l) out[l] = chosen;
    }
    return out;
}


}  // namespace

Trainer::State::Recovery Trainer::State::recoverFromFailure(std::uint64_t step, double detectSeconds) {
    const auto t0 = Clock::now();
    std::vector<std::string> rounds;
    std::vector<int> failedRanks, retiredNow;
    io::FailureRecord record;
    record.step = step;
    record.detect = detectSeconds;
    // A background checkpoint in progress is abandoned (its writer thread ended
    // first); `latest` stays the previous one, and its parts go below.
    checkpointing->abandon();
    for (;;) {
        try {
            const fault::RecoveryReport round = fault::recover(world, membership.retiredNodes());
            membership.retireFailed(round.retiredNodes);
            io::fence().advance();  // every survivor alike: the failed ones are left behind
            rounds.push_back(round.describe());
            failedRanks.insert(failedRanks.end(), round.failedRanks.begin(), round.failedRanks.end());
            retiredNow.insert(retiredNow.end(), round.retiredNodes.begin(), round.retiredNodes.end());
            ++record.rounds;
            record.revoke += round.revokeSeconds;
            record.shrink += round.shrinkSeconds;
            record.regroup += round.regroupSeconds;
            io::fitText(record.failedRanks, fmt::format("{}", fmt::join(failedRanks, ",")));
            io::fitText(record.retiredNodes, fmt::format("{}", fmt::join(retiredNow, ",")));
            report.handOver(world, membership.speaker(), step);
            if (world.originalRank() == report.holder()) io::fence().publish();
            // A previous failure whose replay failed too: its row is written now (by whoever holds
            // diag.h5 after this round), its replay time the attempt that failed.
            report.failureReplayed(detectSeconds);
            injector->at(step, fault::Phase::Regroup);
            const std::string what = fmt::format("{}", fmt::join(rounds, "; then "));
            const auto stop = [&](const std::string& reason) {
                io::fitText(record.layout, "stopped: beyond f");
                report.failure(record);
                return stopBeyondF(step, what, reason, t0);
            };

            // Beyond f: a layer with no holder left, or too few nodes for one pipeline.
            const auto lost = plan::layersWithoutLiveHolder(parallel->layout(), membership.layoutMembers(), world.members());
            if (!lost.empty())
                return stop(fmt::format("layers {} lost every holder", fmt::join(lost, ", ")));
            const auto next = plan::regroup(plan, static_cast<std::uint32_t>(round.nodesLeft));
            if (!next.possible)
                return stop(next.why.empty() ? fmt::format("{} node{} left, and a pipeline needs at least {}",
                                                           round.nodesLeft, round.nodesLeft == 1 ? "" : "s",
                                                           plan.templates.minNodes)
                                             : next.why);
            Regrouped done;
            regroupSurvivors(step, next, done);
            record.instantiate = done.chooseSeconds;
            record.rebuild = done.rebuildSeconds;
            record.migrate = done.moved.migrateSeconds;
            record.bytesMigrated = done.bytesMigrated;
            io::fitText(record.layout, plan::sharesOf(parallel->layout()));
            report.failureReplaying(record);
            const std::string detail = fmt::format(
                "step {}: {}; re-instantiated as {} in {:.2f} ms, migrated {:.2f} MB in {:.1f} ms; recovered in {:.1f} ms",
                step, what, parallel->layout().describe(), 1e3 * done.chooseSeconds, done.bytesMigrated / 1e6,
                1e3 * done.migrateSeconds, 1e3 * since(t0));
            announceRegroup(step, "failure", detail, next, done,
                            next.activeNodes == plan.cluster.nodes && plan.spares > 0
                                ? fmt::format("a spare took the failed node's place after step {} failed", step)
                                : fmt::format("regrouped from the templates after step {} failed", step));
            // What a dead writer or an abandoned checkpoint left (no rank writes one now).
            if (world.rank() == 0)
                if (const auto stale = checkpoints->removeStaleTemporaries())
                    log::detail("removed {} unfinished checkpoint file{}", stale, stale == 1 ? "" : "s");
            return Recovery::Continue;
        } catch (const ProcFailedError& e) {
            log::detail("step {}: another failure during the recovery ({}); recovering again", step, e.what());
            abandonStep();
        }
    }
}

void Trainer::State::regroupSurvivors(std::uint64_t step, const plan::Regroup& next, Regrouped& done) {
    done.lowered = next.tolerance < membership.tolerance() && next.tolerance < plan.f;
    const auto c0 = Clock::now();
    plan::Layout layout = layoutFor(next.instantiation, /*keepLayers=*/true);
    done.chooseSeconds = since(c0);
    const LayoutChange change = changeLayout(std::move(layout), [&] { injector->at(step, fault::Phase::Migrate); });
    membership.layoutTolerates(next.tolerance, next.spares);
    done.moved = change.moved;
    done.bytesMigrated = change.bytesMigrated;
    done.migrateSeconds = change.migrateSeconds;
    done.rebuildSeconds = change.rebuildSeconds;
    if (membership.newlyBenched())
        log::detail("this rank's node is retired; its layers handed on, it stays in the job without work (benched)");
}

void Trainer::State::abandonStep() {
    comm::revoke(world.control());
    parallel->interrupt();
}

Trainer::State::LayoutChange Trainer::State::changeLayout(std::optional<plan::Layout> layout,
                                                          const std::function<void()>& duringMigration) {
    LayoutChange change;
    if (layout) {
        const auto m0 = Clock::now();
        // The live ranks of retired nodes take part as sources (they hold no stage in the new layout).
        change.moved = parallel->reconfigure(world, std::move(*layout), membership.layoutMembers(), duringMigration);
        change.bytesMigrated = change.moved.bytesReceived;
        KILN_MPI(MPI_Allreduce(MPI_IN_PLACE, &change.bytesMigrated, 1, MPI_UINT64_T, MPI_SUM, world.control()));
        change.migrateSeconds = since(m0);
    }
    membership.layoutMadeForMembers();
    const auto r0 = Clock::now();
    parallel->connect(world);
    change.rebuildSeconds = since(r0);
    sliceLoader();
    return change;
}

void Trainer::State::announceRegroup(std::uint64_t step, const std::string& kind, const std::string& detail,
                                     const plan::Regroup& next, const Regrouped& done, const std::string& why) {
    report.notice(step, kind, detail);
    reportTolerance(step, next, done.lowered);
    announceLayout(step, false, why);
}

void Trainer::State::reportTolerance(std::uint64_t step, const plan::Regroup& next, bool lowered) {
    if (!lowered) return;
    const std::uint32_t tolerance = membership.tolerance();
    const std::string why = fmt::format("fault tolerance now {} simultaneous node failure{} (fault.f = {}): {}", tolerance,
                                        tolerance == 1 ? "" : "s", plan.f, next.degraded);
    report.notice(step, "tolerance", why);
}

Trainer::State::Recovery Trainer::State::retireStraggler(std::uint64_t step, int node, const std::string& why) {
    const auto t0 = Clock::now();
    // Published first: the straggler's ranks may be writers of its parts.
    if (checkpointing->pending()) completeCheckpoint();
    // Benched, its ranks time one block every step (from the layout announced below on).
    membership.retireStraggler(node);
    io::fence().advance();  // as after a failure: nothing the straggler still writes counts
    if (world.originalRank() == report.holder()) io::fence().publish();
    const auto next = plan::regroup(plan, static_cast<std::uint32_t>(membership.liveCount()));
    report.handOver(world, membership.speaker(), step);
    Regrouped done;
    regroupSurvivors(step, next, done);
    const std::string detail = fmt::format("before step {}: {}; node {} retired, re-instantiated as {}, migrated {:.2f} MB "
                                           "in {:.1f} ms; {:.1f} ms in all",
                                           step, why, node, parallel->layout().describe(), done.bytesMigrated / 1e6,
                                           1e3 * done.migrateSeconds, 1e3 * since(t0));
    announceRegroup(step, "straggler", detail, next, done,
                    next.activeNodes == plan.cluster.nodes && plan.spares > 0
                        ? fmt::format("a spare took straggler node {}'s place before step {}", node, step)
                        : fmt::format("regrouped from the templates without straggler node {} before step {}", node, step));
    return Recovery::Continue;
}

Trainer::State::Recovery Trainer::State::stopBeyondF(std::uint64_t step, const std::string& what,
                                                     const std::string& cause, Clock::time_point t0) {
    log::info("  FAILURE step {}: {} ({:.1f} ms)", step, what, 1e3 * since(t0));
    const auto writers = liveWriters(parallel->layout(), membership.layoutMembers(), world.members());
    std::vector<std::uint32_t> lost;
    for (std::uint32_t l = 0; l < writers.size(); ++l)
        if (writers[l].empty()) lost.push_back(l);
    const std::uint32_t tolerance = membership.tolerance();
    const std::string reason = fmt::format("beyond what the layout tolerates ({} simultaneous node failure{}): {}",
                                           tolerance, tolerance == 1 ? "" : "s", cause);
    if (lost.empty()) {
        log::info("  {}: writing a checkpoint of step {} from the surviving holders and stopping; requeue the job to "
                  "continue on the nodes it gets",
                  reason, loader->cursor().step);
        try {
            LayerHolders holders;
            for (const auto& stage : writers) holders.push_back({stage});
            checkpoint(loader->cursor().step, holders);
            report.event(step, "stop", reason + "; checkpoint written, exit 75");
        } catch (const ProcFailedError& e) {
            // One more failure while writing: the previous checkpoint stays `latest`.
            const auto latest = checkpoints->latest();
            log::warn("step {}: another rank failed while the checkpoint was written ({}); nothing was written",
                      step, e.what());
            log::info("  a requeued job resumes from {}", latest ? latest->string() : "nothing (no checkpoint yet)");
            report.event(step, "stop", reason + "; the checkpoint failed, exit 75");
        }
    } else {
        const auto latest = checkpoints->latest();
        const std::string from = latest ? latest->string() : "nothing (no checkpoint yet: it starts afresh)";
        log::info("  {}; no checkpoint can be written. A requeued job resumes from {}", reason, from);
        report.event(step, "stop", fmt::format("{}; resume from {}", reason, from));
    }
    return Recovery::BeyondF;
}

}  // namespace kiln::train
