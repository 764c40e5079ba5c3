// What `kiln diag` computes from a run's records: a resumed run's steps count
// once (the last record wins), each layout's step time is the median of the
// steps it ran, the token counts per source follow the kept steps, and an
// expert's load is set against its block's fair share.
#include "kiln/io/diag_summary.hpp"

#include <gtest/gtest.h>

#include <cstring>

namespace {

kiln::io::StepRecord step(std::uint64_t n, double loss, double seconds, std::uint64_t tokens = 100) {
    kiln::io::StepRecord r;
    r.step = n;
    r.loss = loss;
    r.stepTime = seconds;
    r.tokens = tokens;
    r.forward = seconds / 4;
    r.backward = seconds / 2;
    return r;
}

kiln::io::InstantiationRecord layoutFrom(std::uint64_t step, const char* name) {
    kiln::io::InstantiationRecord r;
    r.step = step;
    std::strncpy(r.layout, name, sizeof r.layout - 1);
    return r;
}

}  // namespace

TEST(DiagSummary, AResumedRunsStepsCountOnceTheLastRecordWins) {
    kiln::io::DiagRecords records;
    records.sources = {"web", "code"};
    // Steps 0-3, then a resume from a checkpoint at step 2 re-records 2 and 3.
    records.steps = {step(0, 4.0, 1.0), step(1, 3.5, 1.0), step(2, 3.9, 1.0), step(3, 3.8, 1.0),
                     step(2, 3.2, 2.0), step(3, 3.1, 2.0)};
    records.sourceTokens = {{60, 40}, {60, 40}, {1, 1}, {1, 1}, {70, 30}, {50, 50}};
    const auto s = kiln::io::summarize(records);
    ASSERT_EQ(s.steps.size(), 4u);
    EXPECT_DOUBLE_EQ(s.steps[2].loss, 3.2);
    EXPECT_DOUBLE_EQ(s.steps[3].loss, 3.1);
    EXPECT_DOUBLE_EQ(s.totals.time, 6.0);
    EXPECT_DOUBLE_EQ(s.totals.tokens, 400.0);
    EXPECT_DOUBLE_EQ(s.totals.other(), 6.0 / 4);
    ASSERT_EQ(s.tokensPerSource.size(), 2u);
    EXPECT_EQ(s.tokensPerSource[0], 60u + 60 + 70 + 50);
    EXPECT_EQ(s.tokensPerSource[1], 40u + 40 + 30 + 50);
}

TEST(DiagSummary, EachLayoutIsMeasuredOverTheStepsItRan) {
    kiln::io::DiagRecords records;
    for (std::uint64_t n = 0; n < 10; ++n) records.steps.push_back(step(n, 3.0, n < 4 ? 1.0 + 0.1 * n : 5.0));
    records.layouts = {layoutFrom(0, "2+1"), layoutFrom(4, "2"), layoutFrom(10, "2+1")};
    const auto s = kiln::io::summarize(records);
    ASSERT_EQ(s.measuredStepTime.size(), 3u);
    EXPECT_DOUBLE_EQ(s.measuredStepTime[0], 1.2);  // median of 1.0 1.1 1.2 1.3 (the upper one)
    EXPECT_DOUBLE_EQ(s.measuredStepTime[1], 5.0);
    EXPECT_DOUBLE_EQ(s.measuredStepTime[2], 0.0);  // ran no step yet
    // Source rows missing from an older file read as zeros, not as out of range.
    EXPECT_EQ(s.mix.size(), 10u);
}

TEST(DiagSummary, EvaluationsOnePerStepCount) {
    kiln::io::DiagRecords records;
    kiln::io::EvalRecord a, b, c;
    a.step = 10, a.loss = 3.0;
    b.step = 20, b.loss = 2.5;
    c.step = 10, c.loss = 2.9;  // re-run after a resume
    records.evals = {a, b, c};
    const auto s = kiln::io::summarize(records);
    ASSERT_EQ(s.evals.size(), 2u);
    EXPECT_DOUBLE_EQ(s.evals[0].loss, 2.9);
    EXPECT_DOUBLE_EQ(s.evals[1].loss, 2.5);
    EXPECT_DOUBLE_EQ(kiln::io::medianOf({}), 0.0);
}

TEST(DiagSummary, ExpertLoadsAgainstTheirBlocksFairShare) {
    // 2 blocks of 4 experts: the first balanced, the second with everything on expert 2.
    const kiln::io::RouterRow row{{1.0, 2.5}, {0.1, 0.2}, {25, 25, 25, 25, 0, 0, 100, 0}};
    const auto shares = kiln::io::expertShares(row, {2, 4});
    EXPECT_EQ(shares, (std::vector<double>{1, 1, 1, 1, 0, 0, 4, 0}));
    EXPECT_EQ(kiln::io::expertShares({}, {2, 4}), std::vector<double>(8, 0.0));  // a step without routers
}
