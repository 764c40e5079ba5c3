// The machine and model the planner benchmarks share: a GPT-3-sized model
// (96 blocks, d_model 12288, 96 heads, seq_len 2048, vocabulary 50257) on
// nodes of 8 GPUs with 80 GB each, 300 GB/s inside a node, 50 GB/s between.
#pragma once

#include "kiln/arch/model_config.hpp"
#include "kiln/plan/cluster.hpp"

namespace kiln::bench {

inline arch::ModelConfig gpt3Config() {
    arch::ModelConfig c;
    c.vocabSize = 50257;
    c.blocks = 96;
    c.dModel = 12288;
    c.heads = 96;
    c.seqLen = 2048;
    return c;
}

// `width` 0: the planner chooses the stage width.
inline plan::ClusterSpec nodesOf8(std::uint32_t nodes, std::uint32_t width = 0) {
    plan::ClusterSpec c;
    c.nodes = nodes;
    c.ranksPerNode = 8;
    c.memoryPerRank = 80e9;
    c.intraBandwidth = 300e9;
    c.interBandwidth = 50e9;
    c.stageWidth = width;
    return c;
}

}  // namespace kiln::bench
