// What runs between two committed steps and may meet a failure: publishing a
// background checkpoint, writing one, admitting nodes. The step stays
// committed; a failure is recovered from as from a failed step's attempt.
#include "trainer_state.hpp"

#include "kiln/base/log.hpp"
#include "kiln/comm/heartbeat.hpp"
#include "kiln/comm/ulfm.hpp"
#include "kiln/model/cpu_allocations.hpp"

namespace kiln::train {

Trainer::State::Recovery Trainer::State::atBoundary(std::uint64_t step, const char* what,
                                                     const std::function<Recovery()>& work) {
    try {
        return work();
    } catch (const ProcFailedError& e) {
        log::detail("step {}: a rank failed while {}: {}", step, what, e.what());
        abandonStep();
        return recoverFromFailure(step, 0.0);
    }
}

Trainer::State::Recovery Trainer::State::publishFinishedCheckpoint(std::uint64_t step, const Attempt& done) {
    if (!checkpoints->pending() || done.checkpointWriting != 0) return Recovery::Continue;
    return atBoundary(step, "a checkpoint was published", [&] {
        checkpoints->complete(world.control());
        return Recovery::Continue;
    });
}

Trainer::State::Recovery Trainer::State::checkpointSafely(std::uint64_t at, std::uint64_t step, bool background) {
    const NoStepDeadline whileWriting(clock);
    for (;;) {
        const auto begun = Clock::now();
        try {
            injector->at(step, fault::Phase::Checkpoint);
            if (background) {
                checkpoints->start(world.control(), at, parallel->holders());
            } else {
                checkpoints->write(world.control(), at, parallel->holders());
                model::releaseCpuCache();  // the write's staging is not a step's sizes
            }
            report.failureReplayed(since(begun));  // what was replayed is the checkpoint
            rememberHistoryAt(at);
            checkpointStarted = at;
            checkpointLost = 0;
            return Recovery::Continue;
        } catch (const ProcFailedError& e) {
            log::detail("step {}: a rank failed during the checkpoint of step {}: {}", step, at, e.what());
            abandonStep();
            const auto outcome = recoverFromFailure(step, since(begun));
            if (outcome != Recovery::Continue) return outcome;
        }
    }
}

Trainer::State::Recovery Trainer::State::admitAtBoundary(std::uint64_t step) {
    return atBoundary(step, "nodes were admitted", [&] {
        if (checkpoints->pending()) checkpoints->complete(world.control());
        return admit(step);
    });
}

}  // namespace kiln::train
