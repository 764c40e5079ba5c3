// A layer's whole training state (its weights, then both AdamW moments, in the
// order of its parameters) as one flat float32 buffer: what moves when a
// layer migrates to another rank and what a holder sends to the checkpoint
// writer.
#pragma once

#include "kiln/model/gpt.hpp"
#include "kiln/train/adamw.hpp"

#include <torch/torch.h>

#include <functional>

namespace kiln::train {

// Local layer `l` of `model`, on `where` (the host unless a device transport carries it).
torch::Tensor packLayerState(model::Gpt& model, AdamW& optimizer, std::uint32_t l,
                             torch::Device where = torch::Device(torch::kCPU));
// The same values in packLayerState's order, visited in host copies of at
// most `maxValues` floats each: what a checkpoint writer is sent, so that no
// rank copies a whole layer (or a whole model) to host memory at once.
void forEachLayerStatePiece(model::Gpt& model, AdamW& optimizer, std::uint32_t l, std::int64_t maxValues,
                            const std::function<void(const torch::Tensor&)>& visit);
// The values packLayerState gives for local layer `l`: three per parameter.
std::int64_t layerStateSize(model::Gpt& model, std::uint32_t l);
// The reverse, into local layer `l` (values copied to `device`).
void unpackLayerState(const torch::Tensor& flat, model::Gpt& model, AdamW& optimizer, std::uint32_t l, torch::Device device);

}  // namespace kiln::train
