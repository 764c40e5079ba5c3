#include "kiln/comm/node_map.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>

namespace kiln::comm {

NodeMap nodesByHost(const std::vector<std::string>& hostOfRank) {
    NodeMap map;
    std::map<std::string, int> idOfHost;
    for (int rank = 0; rank < static_cast<int>(hostOfRank.size()); ++rank) {
        const auto [it, isNew] = idOfHost.emplace(hostOfRank[rank], map.numNodes());
        if (isNew) {
            map.ranksOfNode.emplace_back();
            map.nodeNames.push_back(hostOfRank[rank]);
        }
        map.nodeOfRank.push_back(it->second);
        map.ranksOfNode[it->second].push_back(rank);
    }
    return map;
}

NodeMap nodesByCount(int numRanks, int ranksPerNode) {
    if (ranksPerNode <= 0) throw std::invalid_argument("nodesByCount: ranksPerNode must be > 0");
    NodeMap map;
    for (int rank = 0; rank < numRanks; ++rank) {
        const int node = rank / ranksPerNode;
        if (node == map.numNodes()) {
            map.ranksOfNode.emplace_back();
            map.nodeNames.push_back("node" + std::to_string(node));
        }
        map.nodeOfRank.push_back(node);
        map.ranksOfNode[node].push_back(rank);
    }
    return map;
}

int longestRunOfOneNode(const NodeMap& map) {
    const int n = static_cast<int>(map.nodeOfRank.size());
    if (n == 0) return 0;
    if (map.numNodes() == 1) return n;
    // Start just after a change of node, so that a run across the ring's end is counted whole.
    int start = 0;
    while (map.nodeOfRank[start] == map.nodeOfRank[(start + n - 1) % n]) ++start;
    int longest = 0, run = 0;
    for (int i = 0; i < n; ++i) {
        const int rank = (start + i) % n, before = (rank + n - 1) % n;
        run = i > 0 && map.nodeOfRank[rank] == map.nodeOfRank[before] ? run + 1 : 1;
        longest = std::max(longest, run);
    }
    return longest;
}

}  // namespace kiln::comm
