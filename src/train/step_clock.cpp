#include "step_clock.hpp"

#include <algorithm>
#include <vector>

namespace kiln::train {

void StepClock::committed(double seconds) {
    slowest_ = std::max(slowest_, seconds);
    recent_.push_back(seconds);
    if (recent_.size() > kWindow) recent_.pop_front();
    ++stepsOnLayout_;
}

double StepClock::boundaryLimit() const { return timeout_ > 0 ? timeout_ : std::max(300.0, 10.0 * slowest_); }

double StepClock::stepDeadline() const {
    if (timeout_ > 0) return timeout_;
    // The step's own clock, once it is known: not in the first steps of a start or after a layout
    // change (profiling, first-touch memory, new communicators), which the boundary's limit covers.
    if (recent_.size() < 3 || stepsOnLayout_ < 2) return boundaryLimit();
    std::vector<double> sorted(recent_.begin(), recent_.end());
    std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(sorted.size() / 2), sorted.end());
    return std::max(deadlineSteps_ * sorted[sorted.size() / 2], deadlineFloor_);
}

}  // namespace kiln::train
