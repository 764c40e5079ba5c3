// The machine the planner plans for: nodes (the failure unit), ranks per node,
// memory per rank, bandwidths.
#pragma once

#include <cstdint>
#include <string>

namespace kiln::config {
class Deck;
}

namespace kiln::plan {

struct ClusterSpec {
    std::uint32_t nodes = 1;
    std::uint32_t ranksPerNode = 1;
    double memoryPerRank = 80e9;  // bytes
    // Host memory every rank holds besides its stage and runtime: the
    // loader's budget, counted when the stages are in host memory (CPU runs).
    double loaderBytesPerRank = 0.0;
    double intraBandwidth = 200e9;  // bytes/s between ranks of one node
    double interBandwidth = 25e9;   // bytes/s between nodes
    std::uint32_t stageWidth = 0;   // ranks per stage; 0: the planner chooses among the divisors of ranksPerNode
    std::string stageWidthOrigin = "plan.stage_width";  // where the deck set it ("FILE:LINE"), for errors
};

// nodes = plan.nodes, or `worldNodes` when that is 0.
ClusterSpec clusterFromDeck(const config::Deck& deck, std::uint32_t worldNodes);

}  // namespace kiln::plan
