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

// The most ranks of one node that follow each other in the ring of all ranks
// (rank n-1 followed by rank 0). Open MPI's heartbeat detector has each rank
// watch the one before it, and not at all when that one shares its host: a
// node gone silent is declared one rank of such a run at a time, the first
// after one timeout and each next one two later. Ranks in a block per node
// give the node's rank count; ranks round-robin over the nodes give 1.
int longestRunOfOneNode(const NodeMap& map);

}  // namespace kiln::comm
