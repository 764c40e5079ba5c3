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

// Atoms (model/shard_spec.hpp) of a layer's state, for layers split across
// a stage's ranks. `state` is a layer's state tensors (weights, first
// moments, second moments, each in parameterShapes() order) as held by slot
// `slot` of a stage of `width`; atom `atom` of `atoms` (a multiple of
// `width`, inside the slot's shard) is, for each tensor in turn, its units of
// that atom, or the whole tensor where the parameter is replicated. With one
// atom of an unsplit layer it is packLayerState's order.
struct HeldShard {
    std::uint32_t slot = 0, width = 1;
};
std::vector<torch::Tensor> layerState(model::Gpt& model, AdamW& optimizer, std::uint32_t l);
torch::Tensor packAtom(const std::vector<torch::Tensor>& state, const std::vector<arch::ShardSpec>& specs, HeldShard held,
                       std::uint32_t atom, std::uint32_t atoms, torch::Device where = torch::Device(torch::kCPU));
void unpackAtom(const torch::Tensor& flat, const std::vector<torch::Tensor>& state,
                const std::vector<arch::ShardSpec>& specs, HeldShard held, std::uint32_t atom, std::uint32_t atoms);
// The values of one atom of layer `layer`.
std::int64_t atomSize(const arch::ModelConfig& config, std::uint32_t layer, std::uint32_t atom, std::uint32_t atoms);

}  // namespace kiln::train
