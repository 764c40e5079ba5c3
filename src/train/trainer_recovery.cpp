// Recovery from node failures, on every survivor: regroup, migrate, or stop beyond f.
#include "trainer_state.hpp"

#include "kiln/base/error.hpp"
#include "kiln/base/log.hpp"
#include "kiln/base/watchdog.hpp"
#include "kiln/comm/mpi_check.hpp"
#include "kiln/comm/ulfm.hpp"
#include "kiln/fault/recovery.hpp"
#include "kiln/comm/connection_reset.hpp"
#include "kiln/comm/deadline.hpp"
#include "kiln/comm/heartbeat.hpp"
#include "kiln/io/fence.hpp"
#include "kiln/io/launch_record.hpp"
#include "kiln/io/quorum_witness.hpp"
#include "kiln/plan/migration.hpp"
#include "kiln/plan/regroup.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <csignal>
#include <cstdio>
#include <cstring>

namespace kiln::train {
namespace {

}  // namespace

// The trainer as a recovery sees it: this rank's part of each collective
// step of a recovery (recovery_coordinator.hpp).
class Trainer::State::Survivors : public RecoveryCoordinator::Survivors {
public:
    Survivors(State& state, std::uint64_t step, double detectSeconds)
        : s_(state), step_(step), detectSeconds_(detectSeconds), epochAtStart_(io::fence().epoch()) {}

    fault::RecoveryReport agree() override {
        s_.injector->at(step_, fault::Phase::Agree);
        fault::RecoveryReport round = fault::recover(s_.world, s_.membership.retiredNodes());
        s_.membership.retireFailed(round.retiredNodes);
        io::fence().advance();  // every survivor alike: the failed ones are left behind
        return round;
    }
    void agreed() override {
        s_.report.handOver(s_.world, s_.membership.speaker(), step_);
        if (s_.world.originalRank() == s_.report.holder()) io::fence().publish();
        // A previous failure whose replay failed too: its row is written now (by whoever holds
        // diag.h5 after this round), its replay time the attempt that failed.
        s_.report.failureReplayed(detectSeconds_);
        s_.injector->at(step_, fault::Phase::Regroup);
    }
    std::vector<std::uint32_t> layersWithoutLiveHolder() const override {
        return plan::layersWithoutLiveHolder(s_.parallel->layout(), s_.membership.layoutMembers(), s_.world.members());
    }
    plan::Running running() const override { return s_.running(); }
    Regrouped regroup(const plan::Regroup& next) override { return s_.regroupSurvivors(step_, next); }
    void recovered(const io::FailureRecord& record, const std::string& detail, const plan::Regroup& next, bool lowered,
                   const std::string& why) override {
        s_.report.failureReplaying(record);
        s_.announceRegroup(step_, "failure", detail, next, lowered, why);
        // What a dead writer or an abandoned checkpoint left (no rank writes one now).
        if (s_.world.rank() == 0)
            if (const auto stale = s_.checkpoints->store().removeStaleTemporaries())
                log::detail("removed {} unfinished checkpoint file{}", stale, stale == 1 ? "" : "s");
    }
    void confirm() override {
        // One agreement reports a participant that died since the round to some survivors; a second makes
        // that every survivor's answer (issue 50: a rank killed right after the round went unrecorded).
        bool seen = false;
        comm::agree(s_.world.control(), 1, &seen);
        if (comm::agree(s_.world.control(), seen ? 0 : 1) != 1)
            throw ProcFailedError("a rank failed after the recovery's round, before the job stopped beyond f", 0);
    }
    Recovery stop(const io::FailureRecord& record, const std::string& what, const std::string& reason,
                  double seconds) override {
        const Recovery stopped = s_.stopBeyondF(step_, what, reason, seconds);
        s_.report.failure(record);  // after the checkpoint: a rank failing in it starts another round first
        return stopped;
    }
    void abandon() override { s_.abandonStep(); }
    bool holdQuorum(QuorumSide side) override {
        // A minority never claims: it may be all that survived a crash, but from inside that looks the same as
        // being cut off from a majority that goes on; it stands down, and the job is requeued if no side holds
        // the quorum. A majority or exactly half claims at once; of two halves the first to claim goes on.
        if (side == QuorumSide::Minority) return false;
        int held = 1;
        if (s_.world.rank() == 0) {  // the side's lowest survivor claims for it
            const io::QuorumClaim claim = io::claimQuorum(s_.runDir, epochAtStart_, s_.world.members());
            if (!claim.problem.empty())
                log::warn("step {}: the quorum witness could not be claimed ({}): this side cannot know that no other "
                          "goes on, so it stops",
                          step_, claim.problem);
            else if (claim.held)
                io::removeOldWitnesses(s_.runDir, epochAtStart_);
            else
                log::detail("step {}: the quorum witness names ranks {}, not this side", step_, claim.holders);
            held = claim.held ? 1 : 0;
        }
        return comm::agree(s_.world.control(), held) == 1;
    }
    [[noreturn]] void standDown(const std::string& why) override {
        if (s_.world.rank() == 0) {
            log::warn("{}", why);
            // For the launcher: if no side claims this recovery's witness soon, none goes on. A side that can
            // claim it does so right after its own agreement, which follows the failure's detection on its side:
            // a few heartbeat timeouts of spread between the sides, and a margin.
            io::markStoodDown(io::quorumWitnessPath(s_.runDir, epochAtStart_),
                              std::max(60.0, 30.0 + 4.0 * comm::heartbeatTimeout()), why);
        }
        std::fflush(stdout);
        std::fflush(stderr);
        comm::resetConnectionsOnExit();  // what it queued while cut off must not reach the other side on healing
        std::raise(SIGKILL);  // as a failed node ends: the side that goes on sees these ranks fail
        std::abort();
    }

private:
    State& s_;
    std::uint64_t step_;
    double detectSeconds_;
    std::uint64_t epochAtStart_;  // names the recovery's quorum witness alike on every side
};

Recovery Trainer::State::recoverFromFailure(std::uint64_t step, double detectSeconds, const char* cause) {
    // Agreements and shrinks wait for failure detection: the boundary's limit, not the step's.
    comm::setTrainingThreadLimit(clock.boundaryLimit());
    // A background checkpoint in progress is abandoned (its writer thread ended
    // first); `latest` stays the previous one, and its parts go below. The loop
    // takes one again at the first boundary after the recovery (noticeLostCheckpoint).
    checkpoints->abandon();
    Survivors survivors(*this, step, detectSeconds);
    // A recovery's deadline (issue 64). Open MPI 5.0's agreement and shrink can wait forever when a host lost
    // power or was cut off, and every survivor is then stuck alike: before the pump's limit ends one of them
    // alone (heartbeat.hpp), leaving the others to record a healthy rank as failed, the whole job ends for a
    // requeue.
    const double limit = 0.9 * clock.boundaryLimit();
    const base::Watchdog watchdog(limit, [step, limit] {
        io::endJobForRequeue(fmt::format("requeue: the recovery from the failure in step {} made no progress in {:.0f} s "
                                         "(an agreement or shrink that Open MPI never completes: a host that lost "
                                         "power or was cut off?)",
                                         step, limit));
    });
    try {
        const auto outcome = RecoveryCoordinator(plan, step, detectSeconds, cause).run(survivors);
        if (outcome == Recovery::Continue) noticeLostCheckpoint();
        return outcome;
    } catch (const comm::CommunicationTimeout& e) {
        io::endJobForRequeue(fmt::format("requeue: the recovery from the failure in step {} met its deadline: {}", step, e.what()));
    }
}

void Trainer::State::noticeLostCheckpoint() {
    if (world.rank() != 0 || checkpointStarted == 0) return;
    if (checkpoints->store().latestStep().value_or(0) < checkpointStarted)
        checkpointLost = std::max(checkpointLost, checkpointStarted);
}

Regrouped Trainer::State::regroupSurvivors(std::uint64_t step, const plan::Regroup& next) {
    Regrouped done;
    done.lowered = next.tolerance < membership.tolerance() && next.tolerance < plan.f;
    const auto c0 = Clock::now();
    plan::Layout layout = layoutFor(next);
    done.chooseSeconds = since(c0);
    const LayoutChange change = changeLayout(std::move(layout), step);
    membership.layoutTolerates(next.tolerance, next.spares);
    done.migrateSeconds = change.moved.migrateSeconds;
    done.bytesMigrated = change.bytesMigrated;
    done.rebuildSeconds = change.rebuildSeconds;
    done.layout = parallel->layout().describe();
    done.shares = plan::sharesOf(parallel->layout());
    if (membership.newlyBenched())
        log::detail("this rank's node is retired; its layers handed on, it stays in the job without work (benched)");
    return done;
}

void Trainer::State::abandonStep() {
    comm::revoke(world.control());
    parallel->interrupt();
}

Trainer::State::LayoutChange Trainer::State::changeLayout(std::optional<plan::Layout> layout, std::uint64_t step) {
    const auto at = [this, step](fault::Phase phase) { injector->at(step, phase); };
    LayoutChange change;
    clock.layoutChanged();  // new stages and communicators: the step deadline waits for the step clock again
    if (layout) {
        const auto m0 = Clock::now();
        // The live ranks of retired nodes take part as sources (they hold no stage in the new layout).
        change.moved = parallel->reconfigure(world, std::move(*layout), membership.layoutMembers(), at);
        // Committed: the layout's rank numbers now stand for the members of now. Recorded before the next
        // collective, which can fail: a recovery round after it must read the new layout with its own members,
        // or a survivor is told to send layers it no longer holds (issue 50: a healthy rank's segfault).
        membership.layoutMadeForMembers();
        at(fault::Phase::Rebuild);
        change.bytesMigrated = change.moved.bytesReceived;
        KILN_MPI(MPI_Allreduce(MPI_IN_PLACE, &change.bytesMigrated, 1, MPI_UINT64_T, MPI_SUM, world.control()));
        change.migrateSeconds = since(m0);
    } else {
        membership.layoutMadeForMembers();
    }
    const auto r0 = Clock::now();
    parallel->connect(world);
    change.rebuildSeconds = since(r0);
    sliceLoader();
    return change;
}

void Trainer::State::announceRegroup(std::uint64_t step, const std::string& kind, const std::string& detail,
                                     const plan::Regroup& next, bool lowered, const std::string& why) {
    report.notice(step, kind, detail);
    reportTolerance(step, next, lowered);
    announceLayout(step, false, why);
}

void Trainer::State::reportTolerance(std::uint64_t step, const plan::Regroup& next, bool lowered) {
    if (!lowered) return;
    const std::uint32_t tolerance = membership.tolerance();
    const std::string why = fmt::format("fault tolerance now {} simultaneous node failure{} (fault.f = {}): {}", tolerance,
                                        tolerance == 1 ? "" : "s", plan.f, next.degraded);
    report.notice(step, "tolerance", why);
}

Recovery Trainer::State::retireStraggler(std::uint64_t step, int node, const std::string& why) {
    const auto t0 = Clock::now();
    // Published first: the straggler's ranks may be writers of its parts.
    if (checkpoints->pending()) checkpoints->complete(world.control());
    // Benched, its ranks time one block every step (from the layout announced below on).
    membership.retireStraggler(node);
    io::fence().advance();  // as after a failure: nothing the straggler still writes counts
    if (world.originalRank() == report.holder()) io::fence().publish();
    const auto next = regroupNow(step);
    report.handOver(world, membership.speaker(), step);
    const Regrouped done = regroupSurvivors(step, next);
    const std::string detail = fmt::format("before step {}: {}; node {} retired, re-instantiated as {}, migrated {:.2f} MB "
                                           "in {:.1f} ms; {:.1f} ms in all",
                                           step, why, node, done.layout, done.bytesMigrated / 1e6,
                                           1e3 * done.migrateSeconds, 1e3 * since(t0));
    announceRegroup(step, "straggler", detail, next, done.lowered,
                    next.activeNodes == plan.cluster.nodes && plan.spares > 0
                        ? fmt::format("a spare took straggler node {}'s place before step {}", node, step)
                        : fmt::format("regrouped from the templates without straggler node {} before step {}", node, step));
    return Recovery::Continue;
}

Recovery Trainer::State::stopBeyondF(std::uint64_t step, const std::string& what, const std::string& cause,
                                     double seconds) {
    log::info("  FAILURE step {}: {} ({:.1f} ms)", step, what, 1e3 * seconds);
    // What an earlier attempt of this stop (a rank failed in its checkpoint) left: no rank writes one now.
    if (world.rank() == 0) checkpoints->store().removeStaleTemporaries();
    // One rule for a lost layer, the regroup's (issue 65); the writers assemble each layer from its live shards.
    const std::vector<std::uint32_t> lost =
        plan::layersWithoutLiveHolder(parallel->layout(), membership.layoutMembers(), world.members());
    const auto writers = plan::checkpointWriters(parallel->layout(), membership.layoutMembers(), world.members());
    std::vector<std::uint32_t> unassembled;
    for (std::uint32_t l = 0; l < writers.size(); ++l)
        if (writers[l].empty() && std::find(lost.begin(), lost.end(), l) == lost.end()) unassembled.push_back(l);
    const std::uint32_t tolerance = membership.tolerance();
    const std::string reason = fmt::format("beyond what the layout tolerates ({} simultaneous node failure{}): {}",
                                           tolerance, tolerance == 1 ? "" : "s", cause);
    if (lost.empty() && unassembled.empty()) {
        log::info("  {}: writing a checkpoint of step {} from the surviving holders and stopping; requeue the job to "
                  "continue on the nodes it gets",
                  reason, loader->cursor().step);
        try {
            LayerHolders holders;
            for (const auto& stage : writers) holders.push_back({stage});
            checkpoints->write(world.control(), loader->cursor().step, holders);
            report.event(step, "stop", reason + "; checkpoint written, exit 75");
        } catch (const ProcFailedError& e) {
            // One more failure while writing: the previous checkpoint stays `latest`, and another round
            // of the recovery (RecoveryCoordinator) adds the rank to this failure's row and decides again.
            log::warn("step {}: another rank failed while the checkpoint was written ({}); nothing was written",
                      step, e.what());
            throw;
        }
    } else {
        const auto latest = checkpoints->store().latest();
        const std::string from = latest ? latest->string() : "nothing (no checkpoint yet: it starts afresh)";
        if (lost.empty())
            log::info("  layers {} live only as shards of stages of different widths, which a checkpoint cannot "
                      "assemble yet",
                      fmt::join(unassembled, ", "));
        log::info("  {}; no checkpoint can be written. A requeued job resumes from {}", reason, from);
        report.event(step, "stop", fmt::format("{}; resume from {}", reason, from));
    }
    return Recovery::BeyondF;
}

}  // namespace kiln::train
