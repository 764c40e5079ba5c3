// A flagged step's rerun and what its answer means (issue 66; numeric_guard.hpp for the rules).
#include "trainer_state.hpp"

#include "kiln/base/log.hpp"

#include <fmt/format.h>

#include <csignal>

namespace kiln::train {

NumericVerdict Trainer::State::judge(const Attempt& a, double targetsPerStep) const {
    return numerics.judge(a.lossSum / targetsPerStep, a.gradNorm, a.lossBound, a.normBound);
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
    if (culprit < 0 && second.flagged()) {
        // The same numbers from the same state and batch: the batch or the model, not a rank.
        const std::string what = fmt::format("step {}: the rerun gives the same {} ({}): the batch or the model, not a rank",
                                             step, second.what, numericKindName(second.kind));
        if (numerics.policy().skipRepeated) {
            report.notice(step, "numerics", what + "; its batch is skipped (numerics.on_repeat = skip)");
            done.skipped = true;
            return Recovery::Continue;
        }
        report.notice(step, "numerics", what + "; stopping with a checkpoint of the state before it "
                                               "(numerics.on_repeat = stop), exit 3");
        if (const auto outcome = checkpointSafely(step, step, false); outcome != Recovery::Continue) return outcome;
        return Recovery::Numerics;
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
        if (second.flagged()) return answerNumericFlag(step, targetsPerStep, done, second);
        return Recovery::Continue;
    }
    report.notice(step, "numerics", what + "; its node is retired as a failed node is, and the step replayed without it");
    if (world.nodeOfOriginal(world.originalRank()) == node) {
        log::warn("step {}: this rank's node computed wrong numbers; its processes end (SIGKILL) so that the job goes "
                  "on without it",
                  step);
        std::raise(SIGKILL);
    }
    abandonStep();
    if (const auto outcome = recoverFromFailure(step, 0.0, "corruption"); outcome != Recovery::Continue) return outcome;
    return attemptUntilAgreed(step, targetsPerStep, done);
}

}  // namespace kiln::train
