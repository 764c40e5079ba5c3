#include "kiln/plan/cluster.hpp"

#include "kiln/config/deck.hpp"

namespace kiln::plan {

ClusterSpec clusterFromDeck(const config::Deck& deck, std::uint32_t worldNodes) {
    ClusterSpec c;
    const auto nodes = deck.integer("plan.nodes");
    c.nodes = nodes > 0 ? static_cast<std::uint32_t>(nodes) : worldNodes;
    const auto perNode = deck.integer("cluster.ranks_per_node");
    c.ranksPerNode = perNode > 0 ? static_cast<std::uint32_t>(perNode) : 1;
    c.memoryPerRank = deck.real("plan.memory_gb") * 1e9;
    c.intraBandwidth = deck.real("plan.intra_node_gb_s") * 1e9;
    c.interBandwidth = deck.real("plan.inter_node_gb_s") * 1e9;
    c.stageWidth = static_cast<std::uint32_t>(deck.integer("plan.stage_width"));
    c.stageWidthOrigin = deck.setting("plan.stage_width").origin + ": plan.stage_width";
    return c;
}

}  // namespace kiln::plan
