// A flagged step's rerun and what its answer means (issue 66; numeric_guard.hpp for the rules).
#include "trainer_state.hpp"

#include "bit_flip.hpp"
#include "replica_check.hpp"

#include "kiln/base/log.hpp"
#include "kiln/comm/heartbeat.hpp"
#include "kiln/comm/mpi_check.hpp"
#include "kiln/comm/ulfm.hpp"
#include "kiln/data/batch_planner.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <csignal>
#include <filesystem>

namespace kiln::train {
namespace {

// fault.inject RANK:STEP:flip (`bit` 30) and drift (29): that bit of the first value of the last parameter of this
// rank's first layer (one every step uses: GPT-2's position 0, a block's last bias or weight), as a flipped bit in
// memory leaves it until something repairs it.
void flipFirstParameter(model::Gpt& model, std::uint64_t step, int bit) {
    if (model.numLayers() == 0) return;
    torch::NoGradGuard noGrad;
    const auto params = model.layer(0).parameters();
    if (params.empty() || params.back().numel() == 0) return;
    const float value = flipFirstValue(params.back(), bit);
    log::warn("fault injection: bit {} of a value of this rank's parameters flipped as step {} starts (now {:g})", bit,
              step, value);
}

}  // namespace

void Trainer::State::injectMemoryFault(std::uint64_t step) {
    if (injector->strikes(step, fault::Injection::Action::Flip))
        flipFirstParameter(parallel->model(), step, kExponentTopBit);
    if (injector->strikes(step, fault::Injection::Action::Drift))
        flipFirstParameter(parallel->model(), step, kExponentSecondBit);
}

Trainer::State::Recovery Trainer::State::retireForCorruption(std::uint64_t step, const std::vector<int>& ranks,
                                                             const std::string& what) {
    std::vector<int> nodes;
    for (int r : ranks) nodes.push_back(world.nodeOfOriginal(world.members()[static_cast<std::size_t>(r)]));
    std::sort(nodes.begin(), nodes.end());
    nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
    report.notice(step, "numerics", fmt::format("{}; node{} {} retired as failed nodes are, and the step replayed without "
                                                "{}",
                                                what, nodes.size() == 1 ? "" : "s", fmt::join(nodes, ", "),
                                                nodes.size() == 1 ? "it" : "them"));
    if (std::find(nodes.begin(), nodes.end(), world.nodeOfOriginal(world.originalRank())) != nodes.end()) {
        log::warn("step {}: this rank's node computed wrong numbers; its processes end (SIGKILL) so that the job goes "
                  "on without it",
                  step);
        std::raise(SIGKILL);
    }
    // The recovery starts once every rank of those nodes is known to have ended, so that one round retires
    // them all (a rank noticed later would be a second failure, and its node's row split in two).
    std::vector<int> doomed;
    for (int r = 0; r < world.size(); ++r)
        if (std::find(nodes.begin(), nodes.end(), world.nodeOfOriginal(world.members()[static_cast<std::size_t>(r)])) !=
            nodes.end())
            doomed.push_back(r);
    if (!comm::awaitFailures(world.control(), doomed, 0.5 * clock.boundaryLimit()))
        log::detail("step {}: not every rank of the retired node{} was seen to end; recovering all the same", step,
                    nodes.size() == 1 ? "" : "s");
    abandonStep();
    return recoverFromFailure(step, 0.0, "corruption");
}

Trainer::State::Recovery Trainer::State::compareReplicas(std::uint64_t at, std::uint64_t step, bool& compared) {
    compared = false;
    bool outvoted = false;
    const auto outcome = atBoundary(step, "the replicas were compared", [&] {
        const auto t0 = Clock::now();
        const auto mine = layerFingerprints(parallel->model(), parallel->optimizer());
        const int n = static_cast<int>(mine.size());
        std::vector<std::uint64_t> all(mine.size() * static_cast<std::size_t>(world.size()));
        const int rc = MPI_Allgather(mine.data(), n, MPI_UINT64_T, all.data(), n, MPI_UINT64_T, world.control());
        int errorClass = MPI_SUCCESS;
        MPI_Error_class(rc, &errorClass);
        if (rc != MPI_SUCCESS && !comm::isProcessFailure(errorClass)) KILN_MPI(rc);
        // Every rank holds the fingerprints before an outvoted node's processes end: one that ended as soon as
        // its own all-gather was done left a node-mate without its part (seen: a retired node's second rank
        // recovering alone while the others waited for it to end).
        comm::agreeOrThrow(world.control(), rc == MPI_SUCCESS, "the replicas' fingerprints were gathered");
        std::vector<std::vector<std::uint64_t>> byRank;
        for (int r = 0; r < world.size(); ++r) byRank.emplace_back(all.begin() + r * n, all.begin() + (r + 1) * n);
        const ReplicaVerdict verdict = train::compareReplicas(parallel->layout(), byRank);
        compared = true;
        report.event(at, "replicas", fmt::format("{} ({:.1f} ms)", verdict.describe(), 1e3 * since(t0)));
        if (verdict.agree()) {
            lastAgreed = at;
            return Recovery::Continue;
        }
        if (verdict.undecided.empty() && world.faultTolerant() && membership.tolerance() > 0) {
            outvoted = true;
            return retireForCorruption(at, verdict.odd,
                                       fmt::format("before step {}: the replicas disagree: {}", at, verdict.describe()));
        }
        // Two copies and no majority (or nobody to take the node's place): never go on with copies that disagree.
        report.notice(at, "numerics", fmt::format("before step {}: the replicas disagree: {}; stopping for a requeue "
                                                  "(exit 75) from the last checkpoint, compared before it was written",
                                                  at, verdict.describe()));
        return Recovery::BeyondF;
    });
    if (outcome != Recovery::Continue || !outvoted) return outcome;
    return rollBack(at, step);
}

namespace {

// Rank 0's text on every rank of `comm`. Blocking: the wait for the others is not this rank's hang (PeerWait).
std::string broadcastText(MPI_Comm comm, std::string text) {
    const comm::PeerWait peers;
    std::uint64_t length = text.size();
    KILN_MPI(MPI_Bcast(&length, 1, MPI_UINT64_T, 0, comm));
    text.resize(length);
    KILN_MPI(MPI_Bcast(text.data(), static_cast<int>(length), MPI_CHAR, 0, comm));
    return text;
}

}  // namespace

void Trainer::State::rememberHistoryAt(std::uint64_t step) {
    historyAtCheckpoint[step] = {numerics.losses(), numerics.norms()};
    // The checkpoints a rollback may return to are the store's newest few: older histories are not needed.
    while (historyAtCheckpoint.size() > std::max<std::uint64_t>(checkpoints->store().keep(), 1) + 2)
        historyAtCheckpoint.erase(historyAtCheckpoint.begin());
}

Trainer::State::Recovery Trainer::State::rollBack(std::uint64_t at, std::uint64_t step) {
    for (;;) {
        const auto begun = Clock::now();
        try {
            // A background write started at an earlier boundary holds copies compared before it began.
            if (checkpoints->pending()) checkpoints->complete(world.control());
            // Rank 0 decides for every rank (a process admitted later does not know when the copies last agreed).
            std::string path, why;
            if (world.rank() == 0) {
                if (!numerics.policy().rollback) {
                    why = "numerics.rollback = false";
                } else if (lastAgreed >= at) {
                    why = "no step was applied since the copies last agreed";
                } else if (const auto latest = checkpoints->store().latest()) {
                    path = latest->string();
                } else {
                    why = "no checkpoint to return to";
                }
            }
            bool ok = true;
            try {
                const std::string decision = broadcastText(world.control(), path + '\n' + why);
                path = decision.substr(0, decision.find('\n'));
                why = decision.substr(path.size() + 1);
            } catch (const ProcFailedError&) {
                ok = false;  // every rank learns it from the agreement, and all recover together
            }
            comm::agreeOrThrow(world.control(), ok, "the rollback's checkpoint was named");
            if (path.empty()) {
                if (lastAgreed < at)
                    report.notice(at, "numerics", fmt::format("before step {}: steps {} to {}, which the outvoted "
                                                              "copy may have entered, are kept ({})",
                                                              at, lastAgreed, at - 1, why));
                lastAgreed = at;  // the copies now come from the majority
                return Recovery::Continue;
            }
            // Said before the loads, by the member that speaks for the job: it may be the one a failure in
            // them takes, and the survivors then finish the rollback without it.
            report.notice(at, "numerics", fmt::format("before step {}: the copies last agreed before step {}, so the "
                                                      "steps since may have used the outvoted one: every survivor "
                                                      "returns to {} (compared before it was written) and trains "
                                                      "them again (numerics.rollback)",
                                                      at, lastAgreed, std::filesystem::path(path).filename().string()));
            injector->at(at, fault::Phase::Rollback);
            data::Cursor saved;
            std::uint64_t horizon = 0;
            std::string unreadable;
            try {
                const NoStepDeadline whileReading(clock);  // a read may take long on a slow file system
                CheckpointStore::load(path, parallel->model(), parallel->optimizer(), context, saved, horizon);
            } catch (const CheckpointUnreadable& e) {
                unreadable = e.what();
            } catch (const ProcFailedError&) {
                ok = false;
            }
            // One outcome for every rank: all loaded (go on), a rank failed meanwhile (recover, then load
            // again), or some rank could not read its layers (stop).
            if (comm::agreeOrThrow(world.control(), ok, "the rollback's checkpoint was read",
                                   unreadable.empty() ? 1 : 0) == 0) {
                // Some ranks hold the checkpoint's state and others the outvoted steps': never go on with that.
                if (!unreadable.empty()) log::warn("the rollback could not read {}: {}", path, unreadable);
                report.notice(at, "numerics", fmt::format("before step {}: the rollback to {} failed (a rank could not "
                                                          "read its layers); stopping for a requeue (exit 75)",
                                                          at, path));
                return Recovery::BeyondF;
            }
            const data::Cursor cursor = data::BatchPlanner(spec, *corpus).resume(saved);
            loader = openLoader(spec, corpus, cursor);
            if (const auto it = historyAtCheckpoint.find(cursor.step); it != historyAtCheckpoint.end())
                numerics.restore(it->second.first, it->second.second);
            else
                numerics.restore({}, {});  // judged once numerics.min_history steps are remembered again
            log::info("  ROLLBACK before step {}: every survivor holds {} ({:.2f} s); steps {} to {} are trained again",
                      at, std::filesystem::path(path).filename().string(), since(begun), cursor.step, at - 1);
            lastAgreed = cursor.step;
            return Recovery::RolledBack;
        } catch (const ProcFailedError& e) {
            // A failure in the middle of the loads: recover, then load again on the new layout.
            log::detail("step {}: a rank failed during the rollback: {}", step, e.what());
            abandonStep();
            const auto outcome = recoverFromFailure(step, since(begun));
            if (outcome != Recovery::Continue) return outcome;
        }
    }
}

NumericVerdict Trainer::State::judge(const Attempt& a, double targetsPerStep) const {
    auto verdict = numerics.judge(a.lossSum / targetsPerStep, a.gradNorm, a.lossBound, a.normBound);
    if (!verdict.flagged()) verdict = numerics.judgeSent(a.sentPeak, a.peakRank);
    return verdict;
}

Trainer::State::Recovery Trainer::State::answerNumericFlag(std::uint64_t step, double targetsPerStep, Committed& done,
                                                           const NumericVerdict& flag) {
    const Attempt first = done.attempt;
    const std::uint64_t layout = parallel->layoutDigest();
    report.notice(step, "numerics", fmt::format("step {}: {} ({}); not applied, the step runs again from the same state",
                                                step, flag.what, numericKindName(flag.kind)));
    if (const auto outcome = attemptUntilAgreed(step, targetsPerStep, done); outcome != Recovery::Continue) return outcome;
    // A failure during the rerun changed the layout: its replay is judged on its own, as any step.
    if (parallel->layoutDigest() != layout) return Recovery::Continue;
    const Attempt& again = done.attempt;
    const NumericVerdict second = judge(again, targetsPerStep);
    const int culprit = firstDifferingRank(parallel->layout(), first.figures, again.figures);
    // A flag that stays: the batch is skipped or the run stops (numerics.on_repeat).
    const auto repeated = [&](const std::string& what) {
        if (numerics.policy().skipRepeated) {
            report.notice(step, "numerics", what + "; its batch is skipped (numerics.on_repeat = skip)");
            done.skipped = true;
            return Recovery::Continue;
        }
        report.notice(step, "numerics", what + "; stopping with a checkpoint of the state before it "
                                               "(numerics.on_repeat = stop), exit 3");
        if (const auto outcome = checkpointSafely(step, step, false); outcome != Recovery::Continue) return outcome;
        return Recovery::Numerics;
    };
    if (culprit < 0 && second.flagged()) {
        // The same numbers from the same state and batch: a copy of the model that differs from its replicas
        // (memory), else the batch or the model, not a rank.
        bool compared = false;
        const std::uint64_t before = parallel->layoutDigest();
        if (const auto outcome = compareReplicas(step, step, compared); outcome != Recovery::Continue) return outcome;
        if (parallel->layoutDigest() != before) return attemptUntilAgreed(step, targetsPerStep, done);
        return repeated(fmt::format("step {}: the rerun gives the same {} ({}): the batch or the model, not a rank",
                                    step, second.what, numericKindName(second.kind)));
    }
    if (culprit < 0) {
        // The rerun is sound and no stage's own output differed: a transient fault in the gradient sums, which
        // every holder shares. The rerun's numbers go on.
        report.notice(step, "numerics", fmt::format("step {}: the rerun is sound ({}); the first run's fault was in "
                                                    "the gradient sums, not placed on a rank",
                                                    step, second.flagged() ? second.what : "healthy"));
        return Recovery::Continue;
    }
    const int original = world.members()[static_cast<std::size_t>(culprit)];
    const int node = world.nodeOfOriginal(original);
    const std::string what = fmt::format("step {}: the two runs part at rank {} (node {}): a transient fault there "
                                         "(silent corruption)",
                                         step, original, node);
    if (!world.faultTolerant() || membership.tolerance() == 0) {
        // Nothing can take the node's place: the rerun's sound numbers go on, the node stays.
        report.notice(step, "numerics", what + fmt::format("; the job cannot retire it (fault tolerance 0); the rerun's "
                                                           "numbers ({}) go on",
                                                           second.flagged() ? second.what : "healthy"));
        // Flagged again, by a fault that differs each time: not a third run, which could go on forever.
        if (second.flagged()) return repeated(fmt::format("step {}: the rerun is flagged too ({})", step, second.what));
        return Recovery::Continue;
    }
    if (const auto outcome = retireForCorruption(step, {culprit}, what); outcome != Recovery::Continue) return outcome;
    return attemptUntilAgreed(step, targetsPerStep, done);
}

}  // namespace kiln::train
