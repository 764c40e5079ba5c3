// fault.inject's silent corruption (issue 66): one bit of a tensor's first value flipped in place, as a flipped bit
// in memory or in a register leaves it. The exponent's top bit (30) makes 0.5 1.7e38 and a zero 2; its second bit
// (29) makes any value between 5e-20 and 2 in magnitude 2^64 times smaller: nearly 0, a quiet fault.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <cstring>

namespace kiln::train {

constexpr int kExponentTopBit = 30;
constexpr int kExponentSecondBit = 29;

// Returns the value the tensor now holds.
inline float flipFirstValue(const torch::Tensor& tensor, int bit = kExponentTopBit) {
    auto first = tensor.view({-1}).narrow(0, 0, 1);
    float value = first.to(torch::kCPU, torch::kFloat32).item<float>();
    std::uint32_t bits = 0;
    std::memcpy(&bits, &value, sizeof bits);
    bits ^= 1u << bit;
    std::memcpy(&value, &bits, sizeof bits);
    first.fill_(value);
    return value;
}

}  // namespace kiln::train
