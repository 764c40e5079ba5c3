// The numbers' check (issue 66): what is flagged, what history judges spikes, and where two runs of a step part.
#include "../../src/train/numeric_guard.hpp"
#include "../../src/train/replica_check.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using kiln::train::firstDifferingRank;
using kiln::train::NumericGuard;
using kiln::train::NumericPolicy;
using kiln::train::NumericVerdict;
using kiln::train::sameFigure;
using kiln::train::StepFigures;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

NumericPolicy policy() {
    NumericPolicy p;
    p.lossSpike = 4.0;
    p.normSpike = 50.0;
    p.window = 5;
    p.history = 3;
    return p;
}

// Two pipelines of three stages, the second's stages two ranks wide: ranks 0-2 and 3-8.
kiln::plan::Layout twoPipelines() {
    kiln::plan::Layout layout;
    kiln::plan::PipelinePlacement a, b;
    a.ranks = {0, 1, 2};
    b.width = 2;
    b.ranks = {3, 4, 5, 6, 7, 8};
    layout.pipelines = {a, b};
    return layout;
}

StepFigures figures(double value) {
    StepFigures f;
    for (auto* column : {&f.loss, &f.norm, &f.forward, &f.backward}) column->assign(9, value);
    return f;
}

}  // namespace

TEST(NumericGuard, NonFiniteIsFlaggedFromTheFirstStep) {
    const NumericGuard guard(policy());
    EXPECT_FALSE(guard.judge(3.0, 1.0, 0.0, 0.0).flagged());
    EXPECT_EQ(guard.judge(kNaN, 1.0, 0.0, 0.0).kind, NumericVerdict::Kind::NonFinite);
    EXPECT_EQ(guard.judge(3.0, kInf, 0.0, 0.0).kind, NumericVerdict::Kind::NonFinite);
    EXPECT_NE(guard.judge(3.0, kInf, 0.0, 0.0).what.find("gradient norm"), std::string::npos);
}

TEST(NumericGuard, SpikesAreJudgedOnceTheHistoryIsLongEnough) {
    NumericGuard guard(policy());
    guard.committed(3.0, 1.0);
    guard.committed(2.5, 2.0);
    EXPECT_EQ(guard.lossBound(), 0.0) << "two steps of history, three needed";
    guard.committed(2.0, 1.5);
    EXPECT_DOUBLE_EQ(guard.lossBound(), 12.0);  // 4 x the largest loss remembered
    EXPECT_DOUBLE_EQ(guard.normBound(), 100.0);
    EXPECT_FALSE(guard.judge(11.0, 90.0, guard.lossBound(), guard.normBound()).flagged());
    EXPECT_EQ(guard.judge(13.0, 1.0, guard.lossBound(), guard.normBound()).kind, NumericVerdict::Kind::Spike);
    EXPECT_EQ(guard.judge(2.0, 101.0, guard.lossBound(), guard.normBound()).kind, NumericVerdict::Kind::Spike);
    // The window forgets: after five more small steps the 3.0 is gone.
    for (int i = 0; i < 5; ++i) guard.committed(1.0, 1.0);
    EXPECT_DOUBLE_EQ(guard.lossBound(), 4.0);
}

TEST(NumericGuard, AJoinedRankWithoutHistoryJudgesByTheOthersBounds) {
    // Every rank judges with the largest bound any rank sent: one that remembers nothing (0) changes nothing.
    const NumericGuard fresh(policy());
    EXPECT_EQ(fresh.lossBound(), 0.0);
    EXPECT_TRUE(fresh.judge(13.0, 1.0, 12.0, 0.0).flagged());
    EXPECT_FALSE(fresh.judge(13.0, 1.0, 0.0, 0.0).flagged()) << "no history anywhere: no spike test";
}

TEST(NumericGuard, OffMeansNothingIsFlagged) {
    auto p = policy();
    p.check = false;
    EXPECT_FALSE(NumericGuard(p).judge(kNaN, kNaN, 0.0, 0.0).flagged());
}

TEST(NumericGuard, FiguresCompareExactlyOrWithinADevicesRounding) {
    EXPECT_TRUE(sameFigure(1.0, 1.0));
    EXPECT_TRUE(sameFigure(kNaN, kInf)) << "both not finite";
    EXPECT_FALSE(sameFigure(kNaN, 1.0));
    EXPECT_TRUE(sameFigure(1000.0, 1000.0 + 1e-4));
    EXPECT_FALSE(sameFigure(1000.0, 1000.1));
}

TEST(NumericGuard, TwoRunsPartAtTheStageThatMadeTheFirstDifference) {
    const auto layout = twoPipelines();
    const auto same = figures(1.0);
    EXPECT_EQ(firstDifferingRank(layout, same, same), -1);
    // A middle stage's activations differ, and so does everything downstream of it: the middle stage.
    auto forward = same;
    forward.forward[4] = forward.forward[6] = forward.loss[7] = forward.backward[7] = 2.0;
    EXPECT_EQ(firstDifferingRank(layout, same, forward), 4);
    // Only the loss (a NaN in the last stage's loss): the last stage.
    auto loss = same;
    loss.loss[2] = kNaN;
    loss.backward[2] = loss.backward[1] = kNaN;
    EXPECT_EQ(firstDifferingRank(layout, same, loss), 2);
    // A gradient sent back from the middle stage: the first from the last whose gradients differ.
    auto backward = same;
    backward.backward[1] = 5.0;
    EXPECT_EQ(firstDifferingRank(layout, same, backward), 1);
    // Only the norms: the gradient sums, no stage.
    auto sums = same;
    sums.norm[0] = sums.norm[3] = kNaN;
    EXPECT_EQ(firstDifferingRank(layout, same, sums), -1);
}

TEST(ReplicaCheck, TheOutvotedCopyIsNamedAndTwoThatDifferAreUndecided) {
    // Three one-node pipelines of one stage (layers 0-3 each), then two of them only.
    kiln::plan::Layout three;
    for (int r = 0; r < 3; ++r) {
        kiln::plan::PipelinePlacement p;
        p.ranks = {r};
        p.cuts = {0, 4};
        three.pipelines.push_back(p);
    }
    std::vector<std::vector<std::uint64_t>> prints(3, std::vector<std::uint64_t>{11, 12, 13, 14});
    EXPECT_TRUE(kiln::train::compareReplicas(three, prints).agree());
    prints[1][2] = 99;  // rank 1's layer 2
    const auto odd = kiln::train::compareReplicas(three, prints);
    EXPECT_EQ(odd.odd, std::vector<int>{1});
    EXPECT_TRUE(odd.undecided.empty());
    EXPECT_EQ(odd.layers, std::vector<std::uint32_t>{2});
    auto two = three;
    two.pipelines.pop_back();
    const auto undecided = kiln::train::compareReplicas(two, prints);
    EXPECT_TRUE(undecided.odd.empty());
    EXPECT_EQ(undecided.undecided, (std::vector<int>{0, 1}));
    EXPECT_NE(undecided.describe().find("no majority"), std::string::npos);
}

TEST(ReplicaCheck, OnlyCopiesOfTheSameShardAreCompared) {
    // Pipeline 0: one stage two ranks wide (ranks 0, 1); pipeline 1: the same (ranks 2, 3); pipeline 2: one rank
    // holding the layers whole (rank 4). Slot 0's shard differs from slot 1's, and both from the whole layer.
    kiln::plan::Layout layout;
    for (const auto& ranks : {std::vector<int>{0, 1}, std::vector<int>{2, 3}, std::vector<int>{4}}) {
        kiln::plan::PipelinePlacement p;
        p.width = static_cast<std::uint32_t>(ranks.size());
        p.ranks = ranks;
        p.cuts = {0, 2};
        layout.pipelines.push_back(p);
    }
    const std::vector<std::vector<std::uint64_t>> prints = {{1, 2}, {3, 4}, {1, 2}, {3, 4}, {5, 6}};
    EXPECT_TRUE(kiln::train::compareReplicas(layout, prints).agree());
}

TEST(NumericGuard, AValueBeyondTheLimitSentBetweenStagesIsFlagged) {
    // A norm layer can hide a flipped exponent bit from the loss; the largest magnitude sent cannot hide it.
    const NumericGuard guard(policy());
    EXPECT_FALSE(guard.judgeSent(3e3, 2).flagged());
    const auto big = guard.judgeSent(3e37, 2);
    EXPECT_EQ(big.kind, NumericVerdict::Kind::Spike);
    EXPECT_NE(big.what.find("rank 2 sent a value of magnitude 3e+37"), std::string::npos) << big.what;
    EXPECT_EQ(guard.judgeSent(kNaN, 4).kind, NumericVerdict::Kind::NonFinite);
}
