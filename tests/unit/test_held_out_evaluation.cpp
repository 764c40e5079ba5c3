// The held-out evaluation's rules, owned apart from the trainer (issue 52): when one is due, what the ranks must
// agree they evaluated, and the record it leaves. No MPI, no data: the collective loop is the trainer's.
#include "../../src/train/held_out_evaluation.hpp"

#include <gtest/gtest.h>

#include <cmath>

using kiln::train::HeldOutEvaluation;

namespace {

// Two held-out sources, the second weighted `weight` against the first's 1.
kiln::data::LoaderSpec heldOut(double weight = 1.0) {
    kiln::data::LoaderSpec spec;
    spec.sources.push_back({"quotes", "data/quotes", 1.0});
    spec.sources.push_back({"manuals", "data/manuals", weight});
    spec.seqLen = 64;
    spec.globalBatch = 8;
    return spec;
}

}  // namespace

TEST(HeldOutEvaluation, NoneWithoutHeldOutSources) {
    const HeldOutEvaluation none;
    EXPECT_FALSE(none.enabled());
    for (std::uint64_t steps : {0u, 1u, 10u, 100u}) EXPECT_FALSE(none.due(steps, 100));
}

TEST(HeldOutEvaluation, DueEveryNStepsAndAfterTheLast) {
    const HeldOutEvaluation every10(heldOut(), nullptr, 10, 4);
    EXPECT_FALSE(every10.due(0, 25));  // nothing trained yet
    EXPECT_FALSE(every10.due(9, 25));
    EXPECT_TRUE(every10.due(10, 25));
    EXPECT_TRUE(every10.due(20, 25));
    EXPECT_FALSE(every10.due(21, 25));
    EXPECT_TRUE(every10.due(25, 25));  // the last step, off the period
    const HeldOutEvaluation lastOnly(heldOut(), nullptr, 0, 4);
    EXPECT_FALSE(lastOnly.due(10, 25));
    EXPECT_TRUE(lastOnly.due(25, 25));
}

TEST(HeldOutEvaluation, RecordsTheMeanLossPerTargetToken) {
    const HeldOutEvaluation evaluation(heldOut(), nullptr, 0, 4);
    EXPECT_EQ(evaluation.tokens(), 4u * 8u * 64u);
    const auto record = evaluation.record(25, 2.0 * 4 * 8 * 64, 0.5);
    EXPECT_EQ(record.step, 25u);
    EXPECT_EQ(record.tokens, 2048u);
    EXPECT_DOUBLE_EQ(record.loss, 2.0);
    EXPECT_DOUBLE_EQ(record.perplexity, std::exp(2.0));
    EXPECT_DOUBLE_EQ(record.seconds, 0.5);
}

TEST(HeldOutEvaluation, FingerprintNamesEveryInputTheRanksMustShare) {
    const HeldOutEvaluation evaluation(heldOut(), nullptr, 10, 4);
    const auto base = evaluation.fingerprint(20, 3, 0xabc).digest();
    EXPECT_EQ(evaluation.fingerprint(20, 3, 0xabc).digest(), base);
    EXPECT_NE(evaluation.fingerprint(30, 3, 0xabc).digest(), base);  // after another step
    EXPECT_NE(evaluation.fingerprint(20, 4, 0xabc).digest(), base);  // a fenced earlier attempt
    EXPECT_NE(evaluation.fingerprint(20, 3, 0xabd).digest(), base);  // another layout
    EXPECT_NE(HeldOutEvaluation(heldOut(), nullptr, 10, 5).fingerprint(20, 3, 0xabc).digest(), base);  // batches
    EXPECT_NE(HeldOutEvaluation(heldOut(3.0), nullptr, 10, 4).fingerprint(20, 3, 0xabc).digest(), base);  // the mix
    // The mix is its ratios: the same ratios written larger are the same mix.
    auto doubled = heldOut();
    for (auto& source : doubled.sources) source.weight *= 2;
    EXPECT_EQ(HeldOutEvaluation(doubled, nullptr, 10, 4).fingerprint(20, 3, 0xabc).digest(), base);
}
