// Which node each rank lives on. A node is kiln's failure unit: when one rank
// fails, its whole node is retired.
#pragma once

#include <string>
#include <vector>

namespace kiln::comm {

struct NodeMap {
    std::vector<int> nodeOfRank;              // node id of each rank, ids dense from 0
    std::vector<std::vector<int>> ranksOfNode;  // ranks of each node, ascending
    std::vector<std::string> nodeNames;       // host name, or "node<k>" when emulated

    int numNodes() const { return static_cast<int>(ranksOfNode.size()); }
};

// Groups ranks by host name, nodes numbered in order of their lowest rank.
NodeMap nodesByHost(const std::vector<std::string>& hostOfRank);
// Groups consecutive ranks, `ranksPerNode` at a time (the last node may hold fewer).
NodeMap nodesByCount(int numRanks, int ranksPerNode);

}  // namespace kiln::comm
