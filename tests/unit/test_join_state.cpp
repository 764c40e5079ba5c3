// The state a running job sends to the processes it admits: every field comes
// back as it was sent, and a row of another join format (another kiln build)
// is refused naming both versions instead of being misread.
#include "kiln/base/error.hpp"
#include "kiln/train/trainer.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

using namespace kiln::train;

TEST(JoinState, EveryFieldComesBack) {
    JoinState sent;
    sent.startupNodes = 8;
    sent.ranksPerNode = 4;
    sent.f = 2;
    sent.cursor = {17, 3, 99, 1ull << 40};
    sent.optimizerSteps = 123;
    sent.decaySteps = 1000;
    sent.tolerance = 1;
    sent.spares = 2;
    sent.nodeFailures = 3;
    sent.retiredNodes = {5};
    sent.stragglerNodes = {1, 6};
    sent.diagHolder = 4;
    sent.nccl = true;
    sent.fenceEpoch = 7;
    sent.layout = {2, 3, -1, 4};
    const JoinState got = unpackJoinState(packJoinState(sent));
    EXPECT_EQ(got.startupNodes, 8u);
    EXPECT_EQ(got.ranksPerNode, 4u);
    EXPECT_EQ(got.f, 2u);
    EXPECT_EQ(got.cursor, sent.cursor);
    EXPECT_EQ(got.optimizerSteps, 123u);
    EXPECT_EQ(got.decaySteps, 1000u);
    EXPECT_EQ(got.tolerance, 1u);
    EXPECT_EQ(got.spares, 2u);
    EXPECT_EQ(got.nodeFailures, 3u);
    EXPECT_EQ(got.retiredNodes, sent.retiredNodes);
    EXPECT_EQ(got.stragglerNodes, sent.stragglerNodes);
    EXPECT_EQ(got.diagHolder, 4);
    EXPECT_TRUE(got.nccl);
    EXPECT_EQ(got.fenceEpoch, 7u);
    EXPECT_EQ(got.layout, sent.layout);
}

TEST(JoinState, AnotherFormatIsRefusedByVersion) {
    auto row = packJoinState(JoinState{});
    row.front() = kJoinStateVersion + 1;
    try {
        unpackJoinState(row);
        FAIL() << "a row of another join format was read";
    } catch (const kiln::Error& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find(fmt::format("join format {}, this process reads format {}", kJoinStateVersion + 1,
                                        kJoinStateVersion)),
                  std::string::npos)
            << what;
    }
    EXPECT_THROW(unpackJoinState({}), kiln::Error);
}
