// The rounds of a recovery, the beyond-f rule and the failure row they fill.
#include "recovery_coordinator.hpp"

#include "kiln/base/error.hpp"
#include "kiln/base/log.hpp"
#include "kiln/plan/migration.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace kiln::train {
namespace {

std::string lostReason(const std::vector<std::uint32_t>& layers) {
    return fmt::format("layers {} lost every holder", fmt::join(layers, ", "));
}

}  // namespace

QuorumSide quorumSide(int nodesLeft, int nodesBefore) {
    if (2 * nodesLeft > nodesBefore) return QuorumSide::Majority;
    return 2 * nodesLeft == nodesBefore ? QuorumSide::Half : QuorumSide::Minority;
}

QuorumSide quorumSide(int nodesLeft, int nodesBefore, bool hostLost) {
    return hostLost ? quorumSide(nodesLeft, nodesBefore) : QuorumSide::Majority;
}

const char* quorumSideName(QuorumSide side) {
    switch (side) {
        case QuorumSide::Majority: return "a majority";
        case QuorumSide::Half: return "exactly half";
        case QuorumSide::Minority: return "a minority";
    }
    return "?";
}

RecoveryCoordinator::Verdict RecoveryCoordinator::decide(const plan::RunPlan& plan,
                                                         const std::vector<std::uint32_t>& layersLost, int nodesLeft,
                                                         const plan::Running& running) {
    Verdict verdict;
    if (!layersLost.empty()) {
        verdict.beyondF = true;
        verdict.reason = lostReason(layersLost);
        return verdict;
    }
    const auto live = static_cast<std::uint32_t>(nodesLeft);
    verdict.next = plan::regroup(plan, live, running, plan::regroup(plan, live));
    if (!verdict.next.possible) {
        verdict.beyondF = true;
        verdict.reason = !verdict.next.why.empty()
                             ? verdict.next.why
                             : fmt::format("{} node{} left, and a pipeline needs at least {}", nodesLeft,
                                           nodesLeft == 1 ? "" : "s", plan.templates.minNodes);
    }
    return verdict;
}

RecoveryCoordinator::RecoveryCoordinator(const plan::RunPlan& plan, std::uint64_t step, double detectSeconds,
                                         const char* cause)
    : plan_(plan), start_(std::chrono::steady_clock::now()) {
    record_.step = step;
    record_.detect = detectSeconds;
    io::fitText(record_.cause, cause);
}

double RecoveryCoordinator::seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

std::string RecoveryCoordinator::what() const { return fmt::format("{}", fmt::join(rounds_, "; then ")); }

void RecoveryCoordinator::addRound(const fault::RecoveryReport& round) {
    if (rounds_.empty()) nodesAtStart_ = round.nodesBefore;
    hostLost_ = hostLost_ || round.hostsLost > 0;
    rounds_.push_back(round.describe());
    failedRanks_.insert(failedRanks_.end(), round.failedRanks.begin(), round.failedRanks.end());
    retiredNodes_.insert(retiredNodes_.end(), round.retiredNodes.begin(), round.retiredNodes.end());
    ++record_.rounds;
    record_.revoke += round.revokeSeconds;
    record_.shrink += round.shrinkSeconds;
    record_.regroup += round.regroupSeconds;
    io::fitText(record_.failedRanks, fmt::format("{}", fmt::join(failedRanks_, ",")));
    io::fitText(record_.retiredNodes, fmt::format("{}", fmt::join(retiredNodes_, ",")));
}

std::string RecoveryCoordinator::regroupReason(const plan::Regroup& next) const {
    if (next.replanned) return fmt::format("after step {} failed, {}", record_.step, next.replan);
    std::string kept;
    if (next.kept > 0)
        kept += fmt::format("; {} pipeline{} that lost no node kept as {}", next.kept, next.kept == 1 ? "" : "s",
                            next.kept == 1 ? "it was" : "they were");
    if (next.patched > 0)
        kept += fmt::format("; {} patched (its neighbours took the failed node's layers)", next.patched);
    return next.activeNodes == plan_.cluster.nodes && plan_.spares > 0
               ? fmt::format("a spare took the failed node's place after step {} failed{}", record_.step, kept)
               : fmt::format("regrouped from the templates after step {} failed{}", record_.step, kept);
}

Recovery RecoveryCoordinator::stopBeyondF(Survivors& survivors, const std::string& reason) {
    survivors.confirm();  // a rank lost since the round: another round first, so that the row names it
    io::fitText(record_.layout, "stopped: beyond f");
    return survivors.stop(record_, what(), reason, seconds());
}

Recovery RecoveryCoordinator::run(Survivors& survivors) {
    for (;;) {
        try {
            const fault::RecoveryReport round = survivors.agree();
            addRound(round);
            // Before anything is written: a side cut off from the job's quorum writes nothing at all.
            const QuorumSide side = quorumSide(round.nodesLeft, nodesAtStart_, hostLost_);
            if (!survivors.holdQuorum(side))
                survivors.standDown(fmt::format(
                    "step {}: this side holds {} of the {} nodes the recovery began with ({}), and the job's quorum "
                    "is held by another side: {}; it stops, writing nothing",
                    record_.step, round.nodesLeft, nodesAtStart_, quorumSideName(side), what()));
            survivors.agreed();
            const Verdict verdict =
                decide(plan_, survivors.layersWithoutLiveHolder(), round.nodesLeft, survivors.running());
            if (verdict.beyondF) return stopBeyondF(survivors, verdict.reason);
            Regrouped done;
            try {
                done = survivors.regroup(verdict.next);
            } catch (const plan::LayersLostError& e) {
                // The layout the survivors hold lost more than the round's verdict saw (a rule that
                // disagrees with the migration's: a defect, said as such). Still beyond f: a requeue, not exit 1.
                log::warn("step {}: the regroup found {} although the recovery's verdict did not", record_.step, e.what());
                return stopBeyondF(survivors, lostReason(e.layers()));
            }
            record_.instantiate = done.chooseSeconds;
            record_.rebuild = done.rebuildSeconds;
            record_.migrate = done.migrateSeconds;
            record_.bytesMigrated = done.bytesMigrated;
            io::fitText(record_.layout, done.shares);
            const std::string detail = fmt::format(
                "step {}: {}; re-instantiated as {} in {:.2f} ms, migrated {:.2f} MB in {:.1f} ms; recovered in {:.1f} ms",
                record_.step, what(), done.layout, 1e3 * done.chooseSeconds, done.bytesMigrated / 1e6,
                1e3 * done.migrateSeconds, 1e3 * seconds());
            survivors.recovered(record_, detail, verdict.next, done.lowered, regroupReason(verdict.next));
            return Recovery::Continue;
        } catch (const ProcFailedError& e) {
            log::detail("step {}: another failure during the recovery ({}); recovering again", record_.step, e.what());
            survivors.abandon();
        }
    }
}

}  // namespace kiln::train
