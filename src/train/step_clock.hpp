// How long the training thread may give no sign of progress (comm/heartbeat.hpp): at a step boundary, where
// checkpoints, evaluations, admissions and recoveries run, and inside a step, where the step's own recent
// times say what is normal. Owns the record of committed steps' times. Private to train/; tested alone
// (test_step_clock).
#pragma once

#include <cstddef>
#include <deque>

namespace kiln::train {

class StepClock {
public:
    // `timeout`: fault.step_timeout_s (0: derived from the steps); `deadlineSteps`: fault.step_deadline, the
    // multiple of the median step a step may take; `deadlineFloor`: fault.step_deadline_floor_s.
    StepClock(double timeout, double deadlineSteps, double deadlineFloor)
        : timeout_(timeout), deadlineSteps_(deadlineSteps), deadlineFloor_(deadlineFloor) {}

    // A step was committed after `seconds`.
    void committed(double seconds);
    // New stages and communicators: their first steps are not the clock's measure.
    void layoutChanged() { stepsOnLayout_ = 0; }

    // At a boundary: the deck's timeout, or 10 times the slowest step so far, at least 300 s.
    double boundaryLimit() const;
    // Inside a step: the deck's timeout, or fault.step_deadline times the median of the last steps, at least
    // the floor; the boundary's limit until a few steps ran on the current layout.
    double stepDeadline() const;

    // The median is taken over this many most recent steps.
    static constexpr std::size_t kWindow = 21;

private:
    double timeout_, deadlineSteps_, deadlineFloor_;
    double slowest_ = 0.0;
    std::deque<double> recent_;
    std::size_t stepsOnLayout_ = 0;
};

}  // namespace kiln::train
