// Measures each layer of the model on this machine: forward and backward time
// of one microbatch, parameter, output and activation bytes.
#pragma once

#include "kiln/plan/layer_profile.hpp"

#include <torch/torch.h>

namespace kiln::model {

// `repeat` timed runs after one warm-up; times are medians. threads > 0 sets
// the CPU cores used (model/compute_threads.hpp), 0 all of them, < 0 leaves
// the process's setting alone. On `device`, with bf16
// autocast when `bf16`: the times the planner should plan a GPU run with are
// measured on the GPU, the device synchronised before each clock read.
// `eachKindOnce`: the embedding, one block and the head are measured, and
// every other block is given the first block's times (blocks are alike): a
// quick profile, the size of three layers whatever the model's.
plan::ModelProfile profileModel(const arch::ModelConfig& config, std::uint64_t microBatch, int repeat, int threads = 0,
                                torch::Device device = torch::Device(torch::kCPU), bool bf16 = false,
                                bool eachKindOnce = false);

}  // namespace kiln::model
