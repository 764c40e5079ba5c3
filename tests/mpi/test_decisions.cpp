// Agreed, never assumed: fingerprints of replicated decisions, their check
// across ranks (one that differs is named with its first differing field on
// every rank), and the start-up profile, which every rank must plan from
// alike (issue 37: ranks planned from their own update times and deadlocked).
#include "kiln/comm/decision_check.hpp"
#include "kiln/plan/plan_fingerprint.hpp"
#include "kiln/plan/templates.hpp"
#include "kiln/train/startup_profile.hpp"

#include <gtest/gtest.h>

#include <string>

namespace {

int rank() {
    int r = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}

kiln::comm::Fingerprint decision(int cut) {
    kiln::comm::Fingerprint f("a test layout");
    f.add("pipelines", 2).add("cuts", std::vector<std::uint32_t>{0, static_cast<std::uint32_t>(cut), 6});
    return f.add("step_time", 0.25).add("name", "2+1");
}

// The message every rank got, or "" when none was thrown.
std::string disagreement(const kiln::comm::Fingerprint& mine, const std::vector<int>& members = {}) {
    try {
        kiln::comm::requireAgreement(MPI_COMM_WORLD, mine, members);
    } catch (const kiln::comm::DisagreementError& e) {
        EXPECT_EQ(e.scope(), kiln::ErrorScope::AllRanks);
        return e.what();
    }
    return "";
}

}  // namespace

TEST(Fingerprint, EqualOnlyForTheSameFieldsInTheSameOrder) {
    EXPECT_EQ(decision(3).digest(), decision(3).digest());
    EXPECT_NE(decision(3).digest(), decision(4).digest());
    kiln::comm::Fingerprint a("d"), b("d"), c("d"), d("d");
    a.add("x", 1).add("y", 2);
    b.add("y", 2).add("x", 1);
    c.add("x", 1).add("z", 2);
    d.add("x", 1.0).add("y", 2.0);
    EXPECT_NE(a.digest(), b.digest());  // order
    EXPECT_NE(a.digest(), c.digest());  // names
    EXPECT_NE(a.digest(), d.digest());  // an integer is not a double
    kiln::comm::Fingerprint e("d"), g("d");
    e.add("t", 0.1 + 0.2);
    g.add("t", 0.3);
    EXPECT_NE(e.digest(), g.digest()) << "doubles agree only bit for bit";
}

TEST(Fingerprint, DigestTravelsExactlyInTwoDoubles) {
    for (std::uint64_t d : {std::uint64_t{0}, ~std::uint64_t{0}, decision(5).digest(), std::uint64_t{1} << 63}) {
        double high = 0, low = 0;
        kiln::comm::splitDigest(d, high, low);
        EXPECT_EQ(kiln::comm::joinDigest(high, low), d);
    }
}

TEST(RequireAgreement, PassesWhenEveryRankAgrees) { EXPECT_EQ(disagreement(decision(3)), ""); }

TEST(RequireAgreement, EveryRankNamesTheOddRankAndTheFirstField) {
    const std::string message = disagreement(decision(rank() == 1 ? 4 : 3));
    ASSERT_NE(message, "") << "rank " << rank() << " saw no disagreement";
    EXPECT_NE(message.find("ranks disagree on a test layout: rank 1 computed it differently"), std::string::npos)
        << message;
    EXPECT_NE(message.find("first difference: rank 0 has cuts = [0 3 6], rank 1 has cuts = [0 4 6]"), std::string::npos)
        << message;
}

TEST(RequireAgreement, NamesStartUpRanksAndFieldsOnlyOneRankHas) {
    auto mine = decision(3);
    if (rank() == 2) mine.add("extra", 1);
    const std::string message = disagreement(mine, {10, 11, 12});
    EXPECT_NE(message.find("rank 12 computed it differently"), std::string::npos) << message;
    EXPECT_NE(message.find("rank 10 has (no such field), rank 12 has extra = 1"), std::string::npos) << message;
}

TEST(RequireAgreement, EachRankDifferent) {
    const std::string message = disagreement(decision(rank() + 1));
    EXPECT_NE(message.find("each of the 3 ranks computed it differently"), std::string::npos) << message;
}

// Each rank measures on its own (times, the update, the bytes it kept): the
// profile the plan is made from must come out bit for bit the same, and so
// must the templates planned from it. Fails on a profile whose update times
// were each rank's own.
TEST(StartupProfile, EveryRankPlansFromTheSameProfile) {
    kiln::arch::ModelConfig config;
    config.blocks = 4;
    config.dModel = 32;
    config.heads = 4;
    config.seqLen = 32;
    config.vocabSize = 256;
    for (int attempt = 0; attempt < 3; ++attempt) {
        const auto profile = kiln::train::measureStartupProfile(config, 2, torch::Device(torch::kCPU), false, MPI_COMM_WORLD);
        EXPECT_EQ(disagreement(kiln::plan::fingerprintOf(profile)), "");
        kiln::plan::ClusterSpec cluster;
        cluster.nodes = 3;
        cluster.memoryPerRank = 8e9;
        cluster.intraBandwidth = cluster.interBandwidth = 1e9;
        const auto templates = kiln::plan::planTemplates(profile, cluster, 1, 6);
        EXPECT_EQ(disagreement(kiln::plan::fingerprintOf(templates)), "");
    }
}
