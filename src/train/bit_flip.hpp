// fault.inject's silent corruption (issue 66): the exponent's top bit of a tensor's first value flipped in place,
// as a flipped bit in memory or in a register leaves it (0.5 becomes 1.7e38; a zero becomes 2).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <cstring>

namespace kiln::train {

// Returns the value the tensor now holds.
inline float flipFirstValue(const torch::Tensor& tensor) {
    auto first = tensor.view({-1}).narrow(0, 0, 1);
    float value = first.to(torch::kCPU, torch::kFloat32).item<float>();
    std::uint32_t bits = 0;
    std::memcpy(&bits, &value, sizeof bits);
    bits ^= 1u << 30;
    std::memcpy(&value, &bits, sizeof bits);
    first.fill_(value);
    return value;
}

}  // namespace kiln::train
