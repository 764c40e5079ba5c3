#include "kiln/comm/node_map.hpp"

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

}  // namespace kiln::comm
