// The recovery's rounds and its beyond-f rule, without MPI: a fake trainer
// (Survivors) whose rounds report given failures, and whose regroup may fail
// like a rank dying during the recovery. 4 nodes of 1 rank, a 4-layer model,
// f = 1: templates of 1 and 2 nodes, regrouped onto the nodes left.
#include "../../src/train/recovery_coordinator.hpp"

#include "kiln/base/error.hpp"
#include "kiln/plan/templates.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <deque>

using namespace kiln;
using namespace kiln::train;

namespace {

plan::RunPlan fourNodePlan(double memoryPerRank = 1e12, std::uint32_t f = 1) {
    plan::ModelProfile profile;
    profile.model.blocks = 2;
    profile.microBatch = 1;
    for (int i = 0; i < 4; ++i) profile.layers.push_back({"block", 1e-3, 2e-3, 1'000'000, 100'000, 1'000'000});
    plan::RunPlan plan;
    plan.profile = profile;
    plan.cluster.nodes = 4;
    plan.cluster.ranksPerNode = 1;
    plan.cluster.stageWidth = 1;
    plan.cluster.memoryPerRank = memoryPerRank;
    plan.cluster.intraBandwidth = 50e9;
    plan.cluster.interBandwidth = 5e9;
    plan.f = f;
    plan.globalMicrobatches = 8;
    plan.templates = plan::planTemplates(profile, plan.cluster, plan.f, plan.globalMicrobatches);
    plan.instantiation = plan::instantiate(plan.templates, 4, f + 1, plan.globalMicrobatches);
    return plan;
}

// A round in which start-up rank `rank` of node `node` failed, leaving `nodesLeft`.
fault::RecoveryReport failed(int rank, int node, int nodesLeft) {
    fault::RecoveryReport round;
    round.failedRanks = {rank};
    round.retiredNodes = {node};
    round.nodesLeft = round.ranksLeft = nodesLeft;
    round.nodesBefore = nodesLeft + 1;
    round.hostsLost = 1;  // a node per host, as on a cluster
    round.shrinkSeconds = 0.001;
    return round;
}

// What the coordinator asked of the trainer, and what the trainer answers.
struct FakeSurvivors : RecoveryCoordinator::Survivors {
    std::deque<fault::RecoveryReport> rounds;  // agree() hands these out in order
    int regroupFailures = 0;                   // regroups that meet another failure first
    int confirmFailures = 0;                   // stops that find a rank failed since the round
    std::vector<std::uint32_t> lost;           // layers no live rank holds
    bool quorumHeld = true;                    // whether this side wins the quorum witness
    std::vector<QuorumSide> sides;             // what holdQuorum was asked with
    std::vector<std::string> calls;
    plan::Regroup regroupedAs;
    std::string detail, stopReason, why;
    io::FailureRecord reported;

    fault::RecoveryReport agree() override {
        calls.push_back("agree");
        auto round = rounds.front();
        rounds.pop_front();
        return round;
    }
    void agreed() override { calls.push_back("agreed"); }
    std::vector<std::uint32_t> layersWithoutLiveHolder() const override { return lost; }
    plan::Running running() const override { return {}; }  // nothing kept: a regroup from scratch
    Regrouped regroup(const plan::Regroup& next) override {
        calls.push_back("regroup");
        if (regroupFailures > 0) {
            --regroupFailures;
            throw ProcFailedError("MPI_Sendrecv: a peer failed", /*errorClass=*/0);
        }
        regroupedAs = next;
        Regrouped done;
        done.bytesMigrated = 2'000'000;
        done.migrateSeconds = 0.0123;
        done.layout = "3 nodes";
        done.shares = "shares";
        return done;
    }
    void recovered(const io::FailureRecord& record, const std::string& d, const plan::Regroup&, bool,
                   const std::string& w) override {
        calls.push_back("recovered");
        reported = record;
        detail = d;
        why = w;
    }
    void confirm() override {
        calls.push_back("confirm");
        if (confirmFailures > 0) {
            --confirmFailures;
            throw ProcFailedError("MPIX_Comm_agree: a rank failed after the round", /*errorClass=*/0);
        }
    }
    Recovery stop(const io::FailureRecord& record, const std::string&, const std::string& reason, double) override {
        calls.push_back("stop");
        reported = record;
        stopReason = reason;
        return Recovery::BeyondF;
    }
    void abandon() override { calls.push_back("abandon"); }
    bool holdQuorum(QuorumSide side) override {
        calls.push_back("quorum");
        sides.push_back(side);
        return quorumHeld;
    }
    [[noreturn]] void standDown(const std::string& why) override {
        calls.push_back("standDown");
        throw std::runtime_error(why);  // the trainer's ends the process
    }
};

}  // namespace

TEST(RecoveryCoordinator, OneRoundRegroupsTheSurvivorsAndRecordsTheFailure) {
    const auto plan = fourNodePlan();
    FakeSurvivors survivors;
    survivors.rounds = {failed(2, 2, 3)};
    RecoveryCoordinator coordinator(plan, 7, 0.25);
    EXPECT_EQ(coordinator.run(survivors), Recovery::Continue);
    EXPECT_EQ(survivors.calls, (std::vector<std::string>{"agree", "quorum", "agreed", "regroup", "recovered"}));
    EXPECT_TRUE(survivors.regroupedAs.possible);
    EXPECT_EQ(survivors.regroupedAs.activeNodes, 3u);
    const io::FailureRecord& row = survivors.reported;
    EXPECT_EQ(row.step, 7u);
    EXPECT_EQ(row.rounds, 1u);
    EXPECT_DOUBLE_EQ(row.detect, 0.25);
    EXPECT_STREQ(row.failedRanks, "2");
    EXPECT_STREQ(row.retiredNodes, "2");
    EXPECT_STREQ(row.layout, "shares");
    EXPECT_EQ(row.bytesMigrated, 2'000'000u);
    // One number for the migration, in the row and in the FAILURE line (issue 65).
    EXPECT_DOUBLE_EQ(row.migrate, 0.0123);
    EXPECT_NE(survivors.detail.find("migrated 2.00 MB in 12.3 ms"), std::string::npos) << survivors.detail;
    EXPECT_STREQ(row.cause, "process");
    EXPECT_NE(survivors.detail.find("step 7: failed rank 2 (node 2 retired)"), std::string::npos) << survivors.detail;
    EXPECT_NE(survivors.detail.find("re-instantiated as 3 nodes"), std::string::npos) << survivors.detail;
    EXPECT_EQ(survivors.why, "regrouped from the templates after step 7 failed");
}

TEST(RecoveryCoordinator, AFailureDuringTheRegroupStartsAnotherRoundWithTheLargerSet) {
    const auto plan = fourNodePlan();
    FakeSurvivors survivors;
    survivors.rounds = {failed(2, 2, 3), failed(3, 3, 2)};
    survivors.regroupFailures = 1;
    RecoveryCoordinator coordinator(plan, 4, 0.0);
    EXPECT_EQ(coordinator.run(survivors), Recovery::Continue);
    EXPECT_EQ(survivors.calls, (std::vector<std::string>{"agree", "quorum", "agreed", "regroup", "abandon", "agree", "quorum", "agreed",
                                                          "regroup", "recovered"}));
    // The second round is judged against the nodes of the first: 2 of 4, exactly half (alone it would call 2 of 3
    // a majority, which a cut 2 | 2 could give both sides).
    EXPECT_EQ(survivors.sides, (std::vector<QuorumSide>{QuorumSide::Majority, QuorumSide::Half}));
    EXPECT_EQ(survivors.regroupedAs.activeNodes, 2u) << "the second round's survivors";
    EXPECT_EQ(survivors.reported.rounds, 2u);
    EXPECT_STREQ(survivors.reported.failedRanks, "2,3");
    EXPECT_STREQ(survivors.reported.retiredNodes, "2,3");
    EXPECT_NE(coordinator.what().find("; then failed rank 3"), std::string::npos) << coordinator.what();
}

TEST(RecoveryCoordinator, ALayerWithoutAHolderIsBeyondFWithoutARegroup) {
    const auto plan = fourNodePlan();
    FakeSurvivors survivors;
    survivors.rounds = {failed(0, 0, 2)};
    survivors.lost = {0, 1};
    RecoveryCoordinator coordinator(plan, 3, 0.0);
    EXPECT_EQ(coordinator.run(survivors), Recovery::BeyondF);
    EXPECT_EQ(survivors.calls, (std::vector<std::string>{"agree", "quorum", "agreed", "confirm", "stop"}));
    EXPECT_EQ(survivors.stopReason, "layers 0, 1 lost every holder");
    EXPECT_STREQ(survivors.reported.layout, "stopped: beyond f");
    EXPECT_STREQ(survivors.reported.failedRanks, "0");
}

TEST(RecoveryCoordinator, TooFewNodesForAPipelineIsBeyondF) {
    // Memory for one layer a rank (10 MB; a layer needs 6.1): a pipeline needs all 4 nodes, so 3 are too few.
    const auto plan = fourNodePlan(1.0e7, 0);
    ASSERT_EQ(plan.templates.minNodes, 4u);
    const auto verdict = RecoveryCoordinator::decide(plan, {}, 3, {});
    EXPECT_TRUE(verdict.beyondF);
    EXPECT_EQ(verdict.reason, "3 nodes left, and a pipeline needs at least 4");
    const auto enough = RecoveryCoordinator::decide(fourNodePlan(), {}, 1, {});
    EXPECT_FALSE(enough.beyondF) << enough.reason;
    EXPECT_EQ(enough.next.activeNodes, 1u);
}

// Issue 50: a rank that dies after the round's agreement (nobody talks to it before a stop beyond f) is found by
// the stop's confirmation and named in the failure row, through one more round.
TEST(RecoveryCoordinator, ARankLostBeforeAStopBeyondFIsInItsRow) {
    const auto plan = fourNodePlan();
    FakeSurvivors survivors;
    survivors.rounds = {failed(0, 0, 2), failed(3, 3, 1)};
    survivors.lost = {0, 1};
    survivors.confirmFailures = 1;
    RecoveryCoordinator coordinator(plan, 5, 0.0);
    EXPECT_EQ(coordinator.run(survivors), Recovery::BeyondF);
    EXPECT_EQ(survivors.calls, (std::vector<std::string>{"agree", "quorum", "agreed", "confirm", "abandon", "agree", "quorum", "agreed",
                                                          "confirm", "stop"}));
    EXPECT_STREQ(survivors.reported.failedRanks, "0,3");
    EXPECT_EQ(survivors.reported.rounds, 2u);
}

// DESIGN.md invariant 10: a side goes on only while it holds the quorum; it asks before writing anything.
TEST(RecoveryCoordinator, QuorumSidesCountTheNodesTheRecoveryBeganWith) {
    EXPECT_EQ(quorumSide(3, 4), QuorumSide::Majority);
    EXPECT_EQ(quorumSide(2, 4), QuorumSide::Half);
    EXPECT_EQ(quorumSide(1, 4), QuorumSide::Minority);
    EXPECT_EQ(quorumSide(1, 2), QuorumSide::Half);
    EXPECT_EQ(quorumSide(1, 3), QuorumSide::Minority);
    EXPECT_EQ(quorumSide(0, 1), QuorumSide::Minority);
    // Nodes emulated on hosts that all still answer: a crash, never a cut.
    EXPECT_EQ(quorumSide(1, 4, /*hostLost=*/false), QuorumSide::Majority);
    EXPECT_EQ(quorumSide(1, 4, /*hostLost=*/true), QuorumSide::Minority);
}

TEST(RecoveryCoordinator, ASideWithoutTheQuorumStandsDownBeforeWritingAnything) {
    const auto plan = fourNodePlan();
    FakeSurvivors survivors;
    auto round = failed(2, 2, 1);  // 3 nodes gone from this side's view: a cut 1 | 3, or 3 dead
    round.nodesBefore = 4;
    survivors.rounds = {round};
    survivors.quorumHeld = false;
    RecoveryCoordinator coordinator(plan, 6, 0.0);
    try {
        coordinator.run(survivors);
        FAIL() << "the side went on without the quorum";
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("holds 1 of the 4 nodes the recovery began with (a minority)"),
                  std::string::npos)
            << e.what();
    }
    // Not even diag.h5's hand-over ("agreed"), a checkpoint ("stop") or a regroup.
    EXPECT_EQ(survivors.calls, (std::vector<std::string>{"agree", "quorum", "standDown"}));
    EXPECT_EQ(survivors.sides, std::vector<QuorumSide>{QuorumSide::Minority});
}

TEST(RecoveryCoordinator, NodesEmulatedOnOneHostAreNeverACut) {
    // 3 of 4 nodes crashed, every failed rank's host still answering (nodes emulated on hosts that live): the
    // survivors are the whole job, a majority, and the usual rule applies.
    const auto plan = fourNodePlan();
    FakeSurvivors survivors;
    auto round = failed(2, 2, 1);
    round.nodesBefore = 4;
    round.hostsLost = 0;
    survivors.rounds = {round};
    RecoveryCoordinator coordinator(plan, 6, 0.0);
    EXPECT_EQ(coordinator.run(survivors), Recovery::Continue);
    EXPECT_EQ(survivors.sides, std::vector<QuorumSide>{QuorumSide::Majority});
    EXPECT_EQ(survivors.regroupedAs.activeNodes, 1u);
    EXPECT_STREQ(survivors.reported.cause, "process");
}
