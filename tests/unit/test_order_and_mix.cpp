// The loader's building blocks: keyed permutations and epoch orders are
// bijections, the shuffle spreads documents (measured), and the mix schedule
// meets its weights to within one sample at every point.
#include "kiln/data/epoch_order.hpp"
#include "kiln/data/keyed_permutation.hpp"
#include "kiln/data/mix_schedule.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>
#include <vector>

using namespace kiln::data;

TEST(KeyedPermutation, IsABijectionWithInverseForEverySize) {
    for (std::uint64_t n = 1; n <= 300; ++n) {
        KeyedPermutation p(n, 1234 + n);
        std::vector<bool> seen(n);
        for (std::uint64_t x = 0; x < n; ++x) {
            const auto y = p(x);
            ASSERT_LT(y, n);
            ASSERT_FALSE(seen[y]) << "n=" << n;
            seen[y] = true;
            ASSERT_EQ(p.inverse(y), x);
        }
    }
}

TEST(KeyedPermutation, LargeDomainsInvertAndKeysDiffer) {
    const std::uint64_t n = 1'000'000'000'007ull;
    KeyedPermutation a(n, 1), b(n, 2);
    int same = 0;
    for (std::uint64_t x = 0; x < 2000; ++x) {
        ASSERT_EQ(a.inverse(a(x * 7919)), x * 7919);
        same += a(x) == b(x);
    }
    EXPECT_LT(same, 2);
}

TEST(EpochOrder, VisitsEveryDocumentOnce) {
    for (std::uint64_t docs : {1ull, 2ull, 7ull, 64ull, 65ull, 1000ull, 4097ull})
        for (std::uint64_t block : {1ull, 3ull, 64ull})
            for (std::uint64_t window : {1ull, 2ull, 5ull, 64ull}) {
                EpochOrder order(docs, block, window, 99);
                std::vector<bool> seen(docs);
                for (std::uint64_t p = 0; p < docs; ++p) {
                    const auto d = order.docAt(p);
                    ASSERT_LT(d, docs);
                    ASSERT_FALSE(seen[d]) << docs << " " << block << " " << window << " p=" << p;
                    seen[d] = true;
                }
            }
}

TEST(EpochOrder, NewKeyNewOrder) {
    EpochOrder a(10000, 64, 16, epochKey(1, "web", 0)), b(10000, 64, 16, epochKey(1, "web", 1));
    int same = 0;
    for (std::uint64_t p = 0; p < 10000; ++p) same += a.docAt(p) == b.docAt(p);
    EXPECT_LT(same, 20);
}

// Shuffle quality. Measure: over one epoch, the fraction of consecutive
// positions whose documents are neighbours (|d1 - d2| == 1), and the fraction
// in the same block. A random permutation gives 2/N and about 1/W (W open
// blocks); an unshuffled stream gives 1 and 1 - 1/B. Thresholds: neighbours
// below 1%, same block below 2/W.
TEST(EpochOrder, ConsecutiveDocumentsAreRarelyNeighboursOrSameBlock) {
    const std::uint64_t docs = 200000, block = 64, window = 64;
    EpochOrder order(docs, block, window, epochKey(7, "books", 3));
    std::uint64_t neighbours = 0, sameBlock = 0;
    std::uint64_t previous = order.docAt(0);
    for (std::uint64_t p = 1; p < docs; ++p) {
        const std::uint64_t d = order.docAt(p);
        neighbours += (d + 1 == previous || previous + 1 == d);
        sameBlock += order.blockOf(d) == order.blockOf(previous);
        previous = d;
    }
    const double neighbourRate = double(neighbours) / docs, blockRate = double(sameBlock) / docs;
    EXPECT_LT(neighbourRate, 0.01) << neighbourRate;
    EXPECT_LT(blockRate, 2.0 / window) << blockRate;
    EXPECT_GT(blockRate, 0.25 / window) << "window interleaving should keep some locality: " << blockRate;
}

namespace {

// Runs the schedule for `n` samples from zero counts; checks the quota at every point.
std::vector<std::uint64_t> runSchedule(const MixSchedule& schedule, std::size_t sources, std::uint64_t n) {
    std::vector<std::uint64_t> counts(sources);
    for (std::uint64_t k = 0; k < n; ++k) {
        counts[schedule.pick(counts, k)]++;
        for (std::size_t s = 0; s < sources; ++s) {
            const double target = schedule.share(s) * double(k + 1);
            EXPECT_LT(std::abs(double(counts[s]) - target), 1.0) << "source " << s << " after " << k + 1;
            if (std::abs(double(counts[s]) - target) >= 1.0) return counts;
        }
    }
    return counts;
}

}  // namespace

TEST(MixSchedule, WithinOneSampleOfTheTargetAtEveryPoint) {
    std::mt19937 rng(11);
    for (int trial = 0; trial < 20; ++trial) {
        std::vector<double> weights(1 + rng() % 7);
        for (auto& w : weights) w = (rng() % 4 == 0) ? 0.0 : std::uniform_real_distribution<double>(0.01, 5.0)(rng);
        weights[0] += 0.1;  // never all zero
        MixSchedule schedule(weights);
        const auto counts = runSchedule(schedule, weights.size(), 5000);
        for (std::size_t s = 0; s < weights.size(); ++s)
            if (weights[s] == 0.0) {
                EXPECT_EQ(counts[s], 0u);
            }
    }
}

TEST(MixSchedule, ExactForSimpleRatios) {
    MixSchedule schedule({0.7, 0.3});
    std::vector<std::uint64_t> counts(2);
    for (std::uint64_t k = 0; k < 10; ++k) counts[schedule.pick(counts, k)]++;
    EXPECT_EQ(counts, (std::vector<std::uint64_t>{7, 3}));
}
