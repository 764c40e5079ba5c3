// kiln simulate's price of silent corruption: the expected count from the
// rate; with no checks every corruption is trained on until noticed; the step
// check finds its share in the step; comparisons find the rest after half an
// interval, outvoted by three copies (and rolled back to the last checkpoint where there is one), a requeue with two, impossible with one;
// comparing costs what it reads, so the cheapest interval lies between.
#include "kiln/sim/silent_corruption.hpp"

#include <gtest/gtest.h>

using namespace kiln;

namespace {

// 10 corruptions expected: 100 nodes for 1e6 s (27.8 h), a corruption every 277.8 node-hours.
sim::SilentCorruptionSetup setup(std::uint32_t holders) {
    sim::SilentCorruptionSetup s;
    s.seconds = 1e6;
    s.nodes = 100;
    s.nodeHoursBetween = 100 * 1e6 / 3600 / 10;
    s.stepSeconds = 10;
    s.holders = holders;
    s.checkpointSeconds = 0;  // none: going back means half the run
    s.inStepShare = 0.5;
    s.checkShare = 0.01;
    s.compareSeconds = 1;
    s.recoverySeconds = 30;
    s.requeueSeconds = 900;
    s.noticeSeconds = 86400;
    return s;
}

}  // namespace

TEST(SilentCorruption, ExpectedCountIsNodeHoursOverTheRate) {
    EXPECT_NEAR(sim::expectedCorruptions(setup(3)), 10.0, 1e-9);
    auto llama = setup(3);  // Llama 3: 6 in 54 days on 2,048 nodes of 8 GPUs
    llama.nodes = 2048;
    llama.seconds = 54 * 86400;
    llama.nodeHoursBetween = 16384.0 * 54 * 24 / 6 / 8;
    EXPECT_NEAR(sim::expectedCorruptions(llama), 6.0, 1e-9);
}

TEST(SilentCorruption, WithoutChecksEveryCorruptionIsTrainedOnUntilNoticed) {
    const auto s = setup(3);
    const auto p = sim::priceSilentCorruption(s, false, 0);
    EXPECT_EQ(p.checkSeconds + p.compareSeconds + p.flaggedSeconds + p.comparedSeconds, 0.0);
    EXPECT_NEAR(p.missedSeconds, 10 * (86400 + 1e6 / 2 + 900), 1e-6);
    EXPECT_NEAR(p.exposedSteps, 10 * 8640, 1e-6);
}

TEST(SilentCorruption, TheStepCheckFindsItsShareInTheStep) {
    const auto s = setup(3);
    const auto p = sim::priceSilentCorruption(s, true, 0);
    EXPECT_NEAR(p.checkSeconds, 1e4, 1e-6);
    EXPECT_NEAR(p.flaggedSeconds, 5 * (10 + 30), 1e-6);     // the step again, the node retired
    EXPECT_NEAR(p.missedSeconds, 5 * (86400 + 5e5 + 900), 1e-6);  // the rest change a copy nobody compares
    auto one = setup(1);  // one copy: retiring the node is beyond f, a requeue with nothing redone
    EXPECT_NEAR(sim::priceSilentCorruption(one, true, 0).flaggedSeconds, 5 * (10 + 900), 1e-6);
}

TEST(SilentCorruption, ComparisonsOutvoteWithThreeCopiesRequeueWithTwoAndCannotWithOne) {
    const auto three = sim::priceSilentCorruption(setup(3), true, 100);
    EXPECT_NEAR(three.compareSeconds, 1e5 / 100 * 1, 1e-6);
    EXPECT_NEAR(three.comparedSeconds, 5 * (100 * 10 / 2 + 30), 1e-6);
    EXPECT_EQ(three.missedSeconds, 0.0);
    EXPECT_NEAR(three.exposedSteps, 5 * 50, 1e-6);

    auto s2 = setup(2);
    s2.checkpointSeconds = 5000;  // every 500 steps
    const auto two = sim::priceSilentCorruption(s2, true, 100);
    EXPECT_NEAR(two.comparedSeconds, 5 * (900 + 2500 + 500), 1e-6);

    const auto one = sim::priceSilentCorruption(setup(1), true, 100);
    EXPECT_EQ(one.compareSeconds, 0.0);
    EXPECT_NEAR(one.missedSeconds, 5 * (86400 + 5e5 + 900), 1e-6);
}

TEST(SilentCorruption, AnOutvotedCopyRollsBackToTheLastCheckpoint) {
    auto s = setup(3);
    s.checkpointSeconds = 5000;  // every 500 steps
    s.restoreSeconds = 40;
    // Found at a comparison every 100 steps: on average (500 + 100) / 2 steps after the last checkpoint.
    EXPECT_NEAR(sim::priceSilentCorruption(s, true, 100).comparedSeconds, 5 * (30 + 40 + 300 * 10), 1e-6);
    s.rollback = false;  // the steps beside the bad copy kept: half a comparison interval
    EXPECT_NEAR(sim::priceSilentCorruption(s, true, 100).comparedSeconds, 5 * (100 * 10 / 2 + 30), 1e-6);
}

TEST(SilentCorruption, ACheckpointIsAlwaysPrecededByAComparison) {
    auto s = setup(3);
    s.checkpointSeconds = 500;  // every 50 steps: comparing every 1,000 compares every 50
    const auto p = sim::priceSilentCorruption(s, true, 1000);
    EXPECT_NEAR(p.compareSeconds, 1e5 / 50, 1e-6);
    EXPECT_NEAR(p.exposedSteps, 5 * 25, 1e-6);
}

TEST(SilentCorruption, TheCheapestIntervalLiesBetweenReadingOftenAndFindingLate) {
    // Comparing costs 1e5/K s, finding late 5 x 10K/2 = 25K s: least at K = 63.
    const auto rows = sim::silentCorruptionSweep(setup(3), {1000, 10, 100, 1, 100});
    ASSERT_EQ(rows.size(), 6u);  // no checks, check alone, then 1, 10, 100, 1000
    EXPECT_FALSE(rows[0].check);
    EXPECT_EQ(rows[1].compareEvery, 0u);
    EXPECT_EQ(rows[2].compareEvery, 1u);
    EXPECT_EQ(rows[5].compareEvery, 1000u);
    std::size_t best = 0;
    for (std::size_t i = 1; i < rows.size(); ++i)
        if (rows[i].total() < rows[best].total()) best = i;
    EXPECT_EQ(rows[best].compareEvery, 100u);
    EXPECT_GT(rows[0].total(), 100 * rows[best].total());
}
