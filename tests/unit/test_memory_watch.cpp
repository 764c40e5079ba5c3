// The memory report's arithmetic (issue 52): a rank's growth since the baseline, and the job's summary over the
// ranks with a stage, naming the one furthest from its plan. No MPI: the rows are made here.
#include "../../src/train/memory_watch.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>

using kiln::train::MemoryWatch;

namespace {

MemoryWatch::Row row(double resident, double planned, double device = 0.0) {
    MemoryWatch::Row r(MemoryWatch::kFields, 0.0);
    r[MemoryWatch::kResident] = resident;
    r[MemoryWatch::kCounted] = resident / 2;
    r[MemoryWatch::kHeld] = resident * 0.75;
    r[MemoryWatch::kDevice] = device;
    r[MemoryWatch::kReserved] = device * 1.5;
    r[MemoryWatch::kPlanned] = planned;
    return r;
}

std::vector<double> rows(std::initializer_list<MemoryWatch::Row> each) {
    std::vector<double> all;
    for (const auto& r : each) all.insert(all.end(), r.begin(), r.end());
    return all;
}

}  // namespace

TEST(MemoryWatch, GrowthSinceTheBaselineCountsTouchedPages) {
    MemoryWatch watch;
    watch.markBaseline(-1);
    constexpr std::size_t kBytes = 64u << 20;
    const std::unique_ptr<char[]> block(new char[kBytes]);
    std::memset(block.get(), 1, kBytes);  // touched: resident
    const auto r = watch.sinceBaseline(5e8, -1);
    ASSERT_EQ(r.size(), std::size_t(MemoryWatch::kFields));
    EXPECT_GE(r[MemoryWatch::kResident], 0.9 * kBytes);
    EXPECT_LT(r[MemoryWatch::kResident], 4.0 * kBytes);
    EXPECT_EQ(r[MemoryWatch::kPlanned], 5e8);
    EXPECT_EQ(r[MemoryWatch::kDevice], 0.0);  // no GPU asked for
    EXPECT_EQ(block[kBytes - 1], 1);
}

TEST(MemoryWatch, SummaryOverStagedRanksNamesTheFurthestOff) {
    // Start-up ranks 10, 11, 12: 11 is idle (nothing planned) and is left out even though it grew most.
    const auto all = rows({row(1.1e9, 1e9), row(9e9, 0.0), row(3e9, 2e9)});
    const auto text = MemoryWatch::summary(all, {10, 11, 12}, false);
    ASSERT_TRUE(text.has_value());
    EXPECT_NE(text->find("resident growth 4.100 GB (1.37x)"), std::string::npos) << *text;
    EXPECT_NE(text->find("its live bytes 2.050 GB (0.68x)"), std::string::npos) << *text;
    EXPECT_NE(text->find("planned 3.000 GB"), std::string::npos) << *text;
    EXPECT_NE(text->find("furthest off start-up rank 12: 3.000 GB resident, 2.000 GB planned (1.50x)"), std::string::npos)
        << *text;
}

TEST(MemoryWatch, OnAGpuTheAllocatorsPeakIsHeldToThePlan) {
    const auto all = rows({row(5e8, 2e9, 1.6e9), row(5e8, 2e9, 2.2e9)});
    const auto text = MemoryWatch::summary(all, {0, 1}, true);
    ASSERT_TRUE(text.has_value());
    EXPECT_NE(text->find("the GPU allocator's peak 3.800 GB (0.95x), reserved 5.700 GB"), std::string::npos) << *text;
    EXPECT_NE(text->find("furthest off start-up rank 0: 1.600 GB on the GPU"), std::string::npos) << *text;
}

TEST(MemoryWatch, NothingToSayWhenNoRankHasAStage) {
    EXPECT_FALSE(MemoryWatch::summary(rows({row(1e9, 0.0), row(2e9, 0.0)}), {0, 1}, false).has_value());
    EXPECT_FALSE(MemoryWatch::summary({}, {}, false).has_value());
}
