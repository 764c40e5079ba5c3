// Ranks grouped into nodes: by host name in the order hosts first appear, or
// by a fixed count of ranks per node (cluster.ranks_per_node: the last node
// may be smaller, a count of 0 is refused).
#include "kiln/comm/node_map.hpp"

#include <gtest/gtest.h>

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
