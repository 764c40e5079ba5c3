// A layer's whole training state (its weights, then both AdamW moments, in the
// order of its parameters) as one flat float32 buffer: what moves when a
// layer migrates to another rank and what a holder sends to the checkpoint
// writer.
#pragma once

#include "kiln/model/gpt.hpp"
#include "kiln/train/adamw.hpp"

#include <torch/torch.h>

namespace kiln::train {

// Local layer `l` of `model`, on `where` (the host unless a device transport carries it).
torch::Tensor packLayerState(model::Gpt& model, AdamW& optimizer, std::uint32_t l,
                             torch::Device where = torch::Device(torch::kCPU));
// The values packLayerState gives for local layer `l`: three per parameter.
std::int64_t layerStateSize(model::Gpt& model, std::uint32_t l);
// The reverse, into local layer `l` (values copied to `device`).
void unpackLayerState(const torch::Tensor& flat, model::Gpt& model, AdamW& optimizer, std::uint32_t l, torch::Device device);

}  // namespace kiln::train
