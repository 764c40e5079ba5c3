// Ranks grouped into nodes: by host name in the order hosts first appear, or
// by a fixed count of ranks per node (cluster.ranks_per_node: the last node
// may be smaller, a count of 0 is refused); and the longest run of one node's
// ranks in the ring of all ranks, the ranks of a silent host Open MPI's
// heartbeat detector finds one at a time.
#include "kiln/comm/node_map.hpp"

#include <gtest/gtest.h>

using kiln::comm::longestRunOfOneNode;
using kiln::comm::NodeMap;
using kiln::comm::nodesByCount;
using kiln::comm::nodesByHost;

TEST(NodeMap, ByHostKeepsFirstAppearanceOrder) {
    const auto map = nodesByHost({"b", "a", "b", "c", "a"});
    ASSERT_EQ(map.numNodes(), 3);
    EXPECT_EQ(map.nodeOfRank, (std::vector<int>{0, 1, 0, 2, 1}));
    EXPECT_EQ(map.ranksOfNode[0], (std::vector<int>{0, 2}));
    EXPECT_EQ(map.nodeNames[1], "a");
}

TEST(NodeMap, ByCountLastNodeMayBeSmaller) {
    const auto map = nodesByCount(5, 2);
    ASSERT_EQ(map.numNodes(), 3);
    EXPECT_EQ(map.ranksOfNode[2], (std::vector<int>{4}));
    EXPECT_EQ(map.nodeOfRank[3], 1);
}

TEST(NodeMap, ByCountRejectsZero) { EXPECT_THROW(nodesByCount(4, 0), std::invalid_argument); }

// How many ranks of a silent host Open MPI's detector ring finds one at a time.
TEST(NodeMap, LongestRunOfOneNodeInTheRing) {
    EXPECT_EQ(longestRunOfOneNode(nodesByCount(6, 2)), 2);  // ranks in blocks of 2
    EXPECT_EQ(longestRunOfOneNode(nodesByCount(24, 8)), 8);
    EXPECT_EQ(longestRunOfOneNode(nodesByHost({"a", "b", "c", "a", "b", "c"})), 1);  // round-robin
    // A run across the ring's end counts whole: ranks 4, 5 and 0 share host "a".
    EXPECT_EQ(longestRunOfOneNode(nodesByHost({"a", "b", "b", "c", "a", "a"})), 3);
    EXPECT_EQ(longestRunOfOneNode(nodesByCount(4, 4)), 4);  // one node
    EXPECT_EQ(longestRunOfOneNode(NodeMap{}), 0);
}
