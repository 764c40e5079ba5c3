// The world under mpirun: emulated nodes, the control communicator, and
// whether fault tolerance is reported as the launch asked (KILN_EXPECT_FT).
#include "kiln/comm/ulfm.hpp"
#include "kiln/comm/world.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

TEST(World, EmulatedNodesGroupConsecutiveRanks) {
    kiln::comm::World world(2);
    ASSERT_EQ(world.size(), 4);
    EXPECT_EQ(world.nodes().numNodes(), 2);
    EXPECT_EQ(world.node(), world.rank() / 2);
    EXPECT_EQ(world.nodeSource(), kiln::comm::World::NodeSource::Emulated);
}

TEST(World, HostGroupingPutsAllRanksOfThisMachineOnOneNode) {
    kiln::comm::World world(0);
    EXPECT_EQ(world.nodes().numNodes(), 1);
    EXPECT_EQ(world.nodes().nodeNames[0], world.host());
}

namespace {
int worldRank() {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return rank;
}
}  // namespace

// Slurm's emulated nodes share one host: the node is the one Slurm names,
// and it wins over an emulation by count.
TEST(World, SlurmNodeNamesGroupRanks) {
    const int rank = worldRank();
    setenv("SLURMD_NODENAME", rank == 0 ? "n1" : (rank < 3 ? "n2" : "n3"), 1);
    kiln::comm::World world(2);
    unsetenv("SLURMD_NODENAME");
    EXPECT_EQ(world.nodeSource(), kiln::comm::World::NodeSource::Slurm);
    ASSERT_EQ(world.nodes().numNodes(), 3);
    EXPECT_EQ(world.nodes().nodeNames[static_cast<std::size_t>(world.node())], rank == 0 ? "n1" : (rank < 3 ? "n2" : "n3"));
    EXPECT_EQ(world.nodes().ranksOfNode[1], (std::vector<int>{1, 2}));
}

// A name only some ranks have is not trusted: the deck's emulation applies.
TEST(World, SlurmNodeNameOnSomeRanksOnlyIsIgnored) {
    if (worldRank() == 1) setenv("SLURMD_NODENAME", "n1", 1);
    kiln::comm::World world(2);
    unsetenv("SLURMD_NODENAME");
    EXPECT_EQ(world.nodeSource(), kiln::comm::World::NodeSource::Emulated);
    EXPECT_EQ(world.nodes().numNodes(), 2);
}

TEST(World, FaultToleranceAsLaunched) {
    const char* expect = std::getenv("KILN_EXPECT_FT");
    ASSERT_NE(expect, nullptr) << "the test registration must say whether ULFM was asked for";
    kiln::comm::World world(0);
    EXPECT_EQ(world.faultTolerant(), std::string(expect) == "1");
}
