// Who is in the job, without MPI: the rules recovery, admission and the
// straggler policy read (live nodes, who speaks, who is benched, the probes'
// reference node, ranks renumbered after a shrink) on rosters a job goes
// through: 4 nodes of 2 ranks, a node failed and shrunk away, a straggler
// retired and back, a node admitted.
#include "../../src/train/membership.hpp"

#include "kiln/train/trainer.hpp"

#include <gtest/gtest.h>

using namespace kiln::train;

namespace {

// A world as Membership sees it (a Roster views one).
struct World {
    std::vector<int> members, nodeOfRank;
    int numNodes = 0, self = 0;
};

// 4 nodes of 2 ranks: start-up ranks 2n and 2n+1 on node n; this process is `self`.
World fourNodes(int self = 0) { return {{0, 1, 2, 3, 4, 5, 6, 7}, {0, 0, 1, 1, 2, 2, 3, 3}, 4, self}; }

// The world after start-up rank `gone` failed and the control communicator shrank.
World without(World roster, int gone) {
    roster.members.erase(std::find(roster.members.begin(), roster.members.end(), gone));
    return roster;
}

struct Job {
    World roster;
    Membership membership{[this] { return Roster{roster.members, roster.nodeOfRank, roster.numNodes, roster.self}; }};
};

}  // namespace

TEST(Membership, LiveNodesAreThoseWithRanksThatAreNotRetired) {
    Job job{fourNodes()};
    job.membership.start(4, 1, 0);
    EXPECT_EQ(job.membership.live().ids, (std::vector<int>{0, 1, 2, 3}));
    EXPECT_EQ(job.membership.live().ranks[2], (std::vector<int>{4, 5}));

    // Rank 3 (node 1) fails: the survivors shrink; node 1 is retired, its rank 2 stays benched.
    job.roster = without(job.roster, 3);
    job.membership.retireFailed({1});
    const LiveNodes live = job.membership.live();
    EXPECT_EQ(live.ids, (std::vector<int>{0, 2, 3}));
    EXPECT_EQ(live.ranks[1], (std::vector<int>{3, 4})) << "ranks of the shrunk control communicator";
    EXPECT_EQ(job.membership.liveCount(), 3u);
    EXPECT_EQ(job.membership.withLiveRanks().ids, (std::vector<int>{0, 1, 2, 3}));
    EXPECT_EQ(job.membership.benchedNodes(), (std::set<int>{1}));
    EXPECT_EQ(job.membership.failures(), 1u);

    // Its last rank fails too: no longer benched, and not counted twice.
    job.roster = without(job.roster, 2);
    job.membership.retireFailed({});
    EXPECT_TRUE(job.membership.benchedNodes().empty());
    EXPECT_EQ(job.membership.failures(), 1u);
}

TEST(Membership, TheLowestMemberOnANodeThatStaysSpeaks) {
    Job job{fourNodes()};
    EXPECT_EQ(job.membership.speaker(), 0);
    job.membership.retireFailed({0});
    job.roster = without(job.roster, 1);
    EXPECT_EQ(job.membership.speaker(), 2) << "rank 0 lives, benched: it no longer speaks";
    job.membership.retireFailed({1, 2, 3});
    EXPECT_EQ(job.membership.speaker(), 0) << "every node retired: the lowest member says the job stops";
}

TEST(Membership, RanksAreRenumberedIntoTheRunningLayout) {
    Job job{fourNodes()};
    job.membership.start(4, 1, 0);
    job.roster = without(job.roster, 3);
    job.membership.retireFailed({1});
    // Before the new layout is made: ranks of the shrunk communicator, in the old layout's numbering.
    const auto old = job.membership.layoutRanks(job.membership.live());
    EXPECT_EQ(old, (std::vector<std::vector<int>>{{0, 1}, {4, 5}, {6, 7}}));
    job.membership.layoutMadeForMembers();
    EXPECT_EQ(job.membership.layoutMembers(), (std::vector<int>{0, 1, 2, 4, 5, 6, 7}));

    // A node admitted (start-up ranks 8 and 9 on node 4): not in the running layout yet.
    job.roster.members.insert(job.roster.members.end(), {8, 9});
    job.roster.nodeOfRank.insert(job.roster.nodeOfRank.end(), {4, 4});
    job.roster.numNodes = 5;
    const auto now = job.membership.layoutRanks(job.membership.live());
    EXPECT_EQ(now.back(), (std::vector<int>{-1, -1}));
    EXPECT_EQ(now[1], (std::vector<int>{3, 4}));
}

TEST(Membership, AStragglerIsRetiredProbesAndComesBack) {
    Job job{fourNodes(/*self=*/4)};
    job.membership.start(4, 1, 0);
    job.membership.retireStraggler(2);
    EXPECT_TRUE(job.membership.retired(2));
    EXPECT_EQ(job.membership.stragglers(), (std::set<int>{2}));
    EXPECT_EQ(job.membership.failures(), 1u);
    EXPECT_TRUE(job.membership.newlyBenched()) << "this process (rank 4) is on node 2";
    EXPECT_FALSE(job.membership.newlyBenched()) << "said once";
    // The reference: an idle node if the layout has one, else the lowest live node.
    EXPECT_EQ(job.membership.referenceNode({3, 1}), 1);
    EXPECT_EQ(job.membership.referenceNode({}), 0);

    job.membership.takeBack(2);
    EXPECT_FALSE(job.membership.retired(2));
    EXPECT_TRUE(job.membership.stragglers().empty());
    EXPECT_EQ(job.membership.failures(), 1u) << "a straggler's retirement stays counted";
    job.membership.retireStraggler(2);
    EXPECT_TRUE(job.membership.newlyBenched()) << "benched again, it says so again";
}

TEST(Membership, AStragglerThatLostARankStopsProbing) {
    Job job{fourNodes()};
    job.membership.retireStraggler(1);
    job.membership.retireStraggler(3);
    job.roster = without(job.roster, 7);
    job.membership.forgetBrokenStragglers(2);
    EXPECT_EQ(job.membership.stragglers(), (std::set<int>{1}));
    EXPECT_TRUE(job.membership.retired(3)) << "still retired: only its probing ends";
}

TEST(Membership, AnAdmittedProcessTakesTheJobsMembershipOver) {
    Job job{fourNodes()};
    job.membership.start(4, 2, 1);
    job.membership.retireFailed({3});
    job.membership.retireStraggler(1);
    JoinState join;
    job.membership.writeTo(join);

    Job joiner{fourNodes(/*self=*/6)};
    joiner.membership.readFrom(join);
    EXPECT_EQ(joiner.membership.startupNodes(), 4u);
    EXPECT_EQ(joiner.membership.tolerance(), 2u);
    EXPECT_EQ(joiner.membership.spares(), 1u);
    EXPECT_EQ(joiner.membership.failures(), 2u);
    EXPECT_EQ(joiner.membership.retiredNodes(), (std::set<int>{1, 3}));
    EXPECT_EQ(joiner.membership.stragglers(), (std::set<int>{1}));
    EXPECT_EQ(joiner.membership.layoutMembers(), joiner.roster.members);
}
