// The training thread's limits (issue 52): what the step clock allows at a boundary and inside a step, from
// the steps it was told of, and how a layout change sends it back to the boundary's limit. No MPI.
#include "../../src/train/step_clock.hpp"

#include <gtest/gtest.h>

using kiln::train::StepClock;

TEST(StepClock, TheDecksTimeoutWinsEverywhere) {
    StepClock clock(42.0, 3.0, 5.0);
    for (int k = 0; k < 10; ++k) clock.committed(100.0);
    EXPECT_EQ(clock.boundaryLimit(), 42.0);
    EXPECT_EQ(clock.stepDeadline(), 42.0);
}

TEST(StepClock, BoundaryLimitIsTenSlowestStepsAtLeast300s) {
    StepClock clock(0.0, 3.0, 5.0);
    EXPECT_EQ(clock.boundaryLimit(), 300.0);
    clock.committed(12.0);
    EXPECT_EQ(clock.boundaryLimit(), 300.0);
    clock.committed(45.0);
    clock.committed(2.0);
    EXPECT_EQ(clock.boundaryLimit(), 450.0);  // the slowest ever, not the last
}

TEST(StepClock, DeadlineWaitsForThreeStepsAndTwoOnTheLayout) {
    StepClock clock(0.0, 3.0, 5.0);
    clock.committed(10.0);
    clock.committed(10.0);
    EXPECT_EQ(clock.stepDeadline(), 300.0);  // two steps: not yet the step's own clock
    clock.committed(10.0);
    EXPECT_EQ(clock.stepDeadline(), 30.0);
    clock.layoutChanged();
    EXPECT_EQ(clock.stepDeadline(), 300.0);
    clock.committed(10.0);
    EXPECT_EQ(clock.stepDeadline(), 300.0);  // one step on the new layout
    clock.committed(10.0);
    EXPECT_EQ(clock.stepDeadline(), 30.0);
}

TEST(StepClock, DeadlineIsTheMedianTimesFactorAboveTheFloor) {
    StepClock clock(0.0, 4.0, 5.0);
    for (double s : {1.0, 9.0, 2.0, 8.0, 3.0}) clock.committed(s);
    EXPECT_EQ(clock.stepDeadline(), 12.0);  // median 3 s: one slow step does not move it
    StepClock fast(0.0, 4.0, 5.0);
    for (int k = 0; k < 5; ++k) fast.committed(0.1);
    EXPECT_EQ(fast.stepDeadline(), 5.0);  // the floor
}

TEST(StepClock, MedianOverTheLastWindowOnly) {
    StepClock clock(0.0, 2.0, 0.0);
    for (std::size_t k = 0; k < StepClock::kWindow; ++k) clock.committed(100.0);
    for (std::size_t k = 0; k < StepClock::kWindow / 2 + 1; ++k) clock.committed(1.0);
    EXPECT_EQ(clock.stepDeadline(), 2.0);  // the old slow steps left the window's majority
    EXPECT_EQ(clock.boundaryLimit(), 1000.0);  // the slowest is remembered for the boundary
}
