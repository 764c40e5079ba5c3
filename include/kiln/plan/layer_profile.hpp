// Per-layer costs that the planner works from: measured by `kiln profile`
// (or described synthetically in a deck for planning ahead of time) and kept
// in an HDF5 file.
//
//   attributes  format "kiln-layer-profile", format_version, device, micro_batch,
//               model_blocks, model_d_model, model_heads, model_mlp_ratio, model_vocab, model_seq_len
//   /layers     one record per layer: kind, forward_s, backward_s, param_bytes,
//               output_bytes, activation_bytes
#pragma once

#include "kiln/arch/model_config.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::plan {

struct LayerProfile {
    std::string kind;              // embedding, block, output
    double forwardSeconds = 0.0;   // one microbatch
    double backwardSeconds = 0.0;  // one microbatch
    std::uint64_t paramBytes = 0;  // parameters; optimizer state and gradients are multiples of it
    std::uint64_t outputBytes = 0;      // what the layer hands to the next stage, per microbatch
    std::uint64_t activationBytes = 0;  // kept for backward, per microbatch in flight
    double optimizerSeconds = 0.0;      // its parameters' AdamW update, once per step (0: not measured)
};

struct ModelProfile {
    arch::ModelConfig model;
    std::uint64_t microBatch = 1;
    std::string device;
    std::vector<LayerProfile> layers;
    // What a training rank holds besides its tensors, measured on the CPU:
    // the resident growth of a profile beyond libtorch's own bytes (the
    // libraries' code and buffers, threads' stacks). 0 on GPUs (the device
    // allocator's peak does not see it) and in profiles written before.
    std::uint64_t runtimeBytes = 0;
};

// A profile from the model's shape: forward time = FLOPs / `tflops`, backward
// twice that; bytes as measured profiles count them.
ModelProfile syntheticProfile(const arch::ModelConfig& config, std::uint64_t microBatch, double tflops);

// Throws InputError naming every model key on which `profile` and `config` differ.
void requireSameModel(const ModelProfile& profile, const arch::ModelConfig& config, const std::string& profilePath);

void writeProfile(const std::string& path, const ModelProfile& profile);
ModelProfile readProfile(const std::string& path);

// The bytes a layer keeps for its backward pass, per microbatch, in fp32:
// an estimate from the layer's shape (inputs of every matmul, norm and
// nonlinearity, and the attention probabilities).
std::uint64_t activationBytesEstimate(const arch::ModelConfig& c, std::uint32_t layer, std::uint64_t microBatch);
// The share of those bytes that a tensor-parallel stage splits among its
// ranks (heads, neurons, vocabulary columns); the rest is whole on each.
double splitActivationShare(const arch::ModelConfig& c, std::uint32_t layer);

}  // namespace kiln::plan
