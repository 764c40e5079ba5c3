// Measures each layer of the model on this machine: forward and backward time
// of one microbatch, parameter, output and activation bytes.
#pragma once

#include "kiln/plan/layer_profile.hpp"

namespace kiln::model {

// `repeat` timed runs after one warm-up; times are medians. threads > 0 sets libtorch's CPU threads.
plan::ModelProfile profileModel(const ModelConfig& config, std::uint64_t microBatch, int repeat, int threads = 0);

}  // namespace kiln::model
