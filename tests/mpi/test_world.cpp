// The world under mpirun: emulated nodes, the control communicator, and
// whether fault tolerance is reported as the launch asked (KILN_EXPECT_FT).
#include "kiln/comm/ulfm.hpp"
#include "kiln/comm/world.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

TEST(World, EmulatedNodesGroupConsecutiveRanks) {
    kiln::comm::World world(2);
    ASSERT_EQ(world.size(), 4);
    EXPECT_EQ(world.nodes().numNodes(), 2);
    EXPECT_EQ(world.node(), world.rank() / 2);
    EXPECT_TRUE(world.nodesEmulated());
}

TEST(World, HostGroupingPutsAllRanksOfThisMachineOnOneNode) {
    kiln::comm::World world(0);
    EXPECT_EQ(world.nodes().numNodes(), 1);
    EXPECT_EQ(world.nodes().nodeNames[0], world.host());
}

TEST(World, FaultToleranceAsLaunched) {
    const char* expect = std::getenv("KILN_EXPECT_FT");
    ASSERT_NE(expect, nullptr) << "the test registration must say whether ULFM was asked for";
    kiln::comm::World world(0);
    EXPECT_EQ(world.faultTolerant(), std::string(expect) == "1");
}
