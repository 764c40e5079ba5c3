// The llama family's two operations that GPT-2 does not have, as Hugging
// Face's LlamaForCausalLM computes them (export and import rely on that).
#pragma once

#include "kiln/arch/model_config.hpp"

#include <torch/torch.h>

namespace kiln::model {

// RMSNorm over the last dimension: the mean square in float32 (or wider), the weight applied in the input's type.
torch::Tensor rmsNorm(const torch::Tensor& x, const torch::Tensor& weight, double eps);

// Rotary position embedding of (B, heads, T, hd) queries or keys at positions 0..T-1, "rotate half"
// convention: dimensions i and i + hd/2 form a pair, turned by position * theta^(-2i/hd) radians. The
// angles are computed in float32, then cast to the input's type.
torch::Tensor applyRotary(const torch::Tensor& x, double theta);

// The same with the angles' cosines and sines (T, hd) given, computed once for the queries and the keys.
struct RotaryAngles {
    torch::Tensor cos, sin;
};
// `rope` scales the frequencies as transformers' rope_type does (arch::RopeScaling); yarn's attention factor
// multiplies the cosines and sines.
RotaryAngles rotaryAngles(std::int64_t positions, std::int64_t headDim, double theta, const torch::Tensor& like,
                          const arch::RopeScaling& rope);
// The (hd/2) inverse frequencies, float32, after `rope`'s scaling.
torch::Tensor rotaryInverseFrequencies(std::int64_t headDim, double theta, const arch::RopeScaling& rope,
                                       const torch::Device& device);
torch::Tensor applyRotary(const torch::Tensor& x, const RotaryAngles& angles);

}  // namespace kiln::model
