// Planner inputs the unit tests share.
#pragma once

#include "kiln/plan/cluster.hpp"

#include <cstdint>

namespace kiln::test {

// `nodes` nodes of one rank and one-rank stages, memory to spare, 50 GB/s inside a node and 5 GB/s between nodes.
inline plan::ClusterSpec oneRankNodes(std::uint32_t nodes) {
    plan::ClusterSpec c;
    c.nodes = nodes;
    c.ranksPerNode = 1;
    c.stageWidth = 1;
    c.memoryPerRank = 1e12;
    c.intraBandwidth = 50e9;
    c.interBandwidth = 5e9;
    return c;
}

}  // namespace kiln::test
