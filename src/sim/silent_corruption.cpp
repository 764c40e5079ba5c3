#include "kiln/sim/silent_corruption.hpp"

#include <algorithm>

namespace kiln::sim {

double expectedCorruptions(const SilentCorruptionSetup& s) {
    if (s.nodeHoursBetween <= 0) return 0.0;
    return double(s.nodes) * s.seconds / 3600.0 / s.nodeHoursBetween;
}

SilentCorruptionPrice priceSilentCorruption(const SilentCorruptionSetup& s, bool check, std::uint64_t compareEvery) {
    SilentCorruptionPrice p;
    p.check = check;
    p.compareEvery = compareEvery;
    p.events = expectedCorruptions(s);
    const double steps = s.stepSeconds > 0 ? s.seconds / s.stepSeconds : 0.0;
    // A corruption strikes at a uniform time: going back to the checkpoint before it redoes half an
    // interval, or half the run where there are none.
    const double backToCheckpoint = s.checkpointSeconds > 0 ? s.checkpointSeconds / 2 : s.seconds / 2;
    const double missed = s.noticeSeconds + backToCheckpoint + s.requeueSeconds;
    const double inStep = p.events * s.inStepShare, inCopy = p.events * (1 - s.inStepShare);

    if (check) {
        p.checkSeconds = s.seconds * s.checkShare;
        // Found before its update: the step again, and the node that computed it retired. With one copy
        // of each layer that is beyond f: a checkpoint of the sound state and a requeue, nothing redone.
        p.flaggedSeconds = inStep * (s.stepSeconds + (s.holders >= 2 ? s.recoverySeconds : s.requeueSeconds));
    } else {
        p.missedSeconds += inStep * missed;
        p.exposedSteps += inStep * s.noticeSeconds / std::max(s.stepSeconds, 1e-12);
    }

    if (compareEvery > 0 && s.holders >= 2 && steps > 0) {
        // kiln also compares before every checkpoint, so a checkpoint is never of a bad copy.
        const double checkpointSteps = s.checkpointSeconds > 0 ? s.checkpointSeconds / s.stepSeconds : steps;
        const double every = std::min(double(compareEvery), checkpointSteps);
        p.compareSeconds = steps / every * s.compareSeconds;
        const double found = every * s.stepSeconds / 2;  // from the corruption to the next comparison
        p.exposedSteps += inCopy * every / 2;
        // Three copies outvote the bad one and its node is retired. With numerics.rollback and a checkpoint, the
        // survivors return to the last one (compared before it was written) and train again from it to where
        // the comparison found the copy: half a checkpoint interval and half a comparison interval on average
        // (a comparison due at a checkpoint finds it before that checkpoint is written). Without, the steps
        // trained beside the bad copy are kept (counted as lost here: they were computed with one wrong copy).
        // Two copies cannot tell which is right: the job stops and restores the last checkpoint.
        const bool rollsBack = s.rollback && s.checkpointSeconds > 0;
        const double outvoted = rollsBack ? s.recoverySeconds + s.restoreSeconds +
                                                (checkpointSteps + every) / 2 * s.stepSeconds
                                          : found + s.recoverySeconds;
        p.comparedSeconds = inCopy * (s.holders >= 3 ? outvoted : s.requeueSeconds + backToCheckpoint + found);
    } else {
        p.missedSeconds += inCopy * missed;
        p.exposedSteps += inCopy * s.noticeSeconds / std::max(s.stepSeconds, 1e-12);
    }
    return p;
}

std::vector<SilentCorruptionPrice> silentCorruptionSweep(const SilentCorruptionSetup& s,
                                                         std::vector<std::uint64_t> compareEvery) {
    std::sort(compareEvery.begin(), compareEvery.end());
    compareEvery.erase(std::unique(compareEvery.begin(), compareEvery.end()), compareEvery.end());
    std::vector<SilentCorruptionPrice> rows{priceSilentCorruption(s, false, 0), priceSilentCorruption(s, true, 0)};
    for (auto k : compareEvery)
        if (k > 0) rows.push_back(priceSilentCorruption(s, true, k));
    return rows;
}

}  // namespace kiln::sim
