// The GPT as an ordered list of layers, so that a pipeline stage is a
// contiguous range of them:
//   layer 0            embedding: token + learned position       (B, T) ids -> (B, T, C)
//   layers 1..blocks   pre-norm transformer block                (B, T, C) -> (B, T, C)
//   layer blocks+1     output: final LayerNorm, head to vocab    (B, T, C) -> (B, T, V)
// A tied head (model.tie_embeddings) is a parameter of the output layer like
// an untied one, starting as the embedding does; the gradient sums make its
// gradient the embedding's (train/gradient_sync.hpp), so that the two copies,
// on the first and the last stage, stay equal.
#pragma once

#include "kiln/arch/model_config.hpp"
#include "kiln/model/router_record.hpp"
#include "kiln/model/tensor_parallel.hpp"

#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

namespace kiln::model {

class LayerImpl : public torch::nn::Module {
public:
    virtual torch::Tensor forward(const torch::Tensor& input) = 0;
    virtual const char* kind() const = 0;
};
using Layer = std::shared_ptr<LayerImpl>;

// Builds layer `index` (its shard for `slice`; whole without one). Its
// initial weights depend only on (config.seed, index): any rank that builds
// layer i gets the same tensors, or the same shard of them. A block of experts records its routing into
// `router` (none: a log of its own that nobody reads).
Layer buildLayer(const arch::ModelConfig& config, std::uint32_t index, SliceHandle slice = {}, RouterHandle router = {});

class Gpt {
public:
    // Builds layers [first, last) of the model (all by default), whole or
    // this rank's shards of a tensor-parallel stage (`slice`).
    explicit Gpt(const arch::ModelConfig& config, std::uint32_t first = 0, std::uint32_t last = ~0u, SliceHandle slice = {},
                 RouterHandle router = {});
    // Layers first, first + 1, ... given (already built for `slice`, e.g. moved from another Gpt).
    Gpt(const arch::ModelConfig& config, std::uint32_t first, std::vector<Layer> layers, SliceHandle slice = {});

    const arch::ModelConfig& config() const { return config_; }
    std::uint32_t firstLayer() const { return first_; }
    std::uint32_t numLayers() const { return static_cast<std::uint32_t>(layers_.size()); }
    LayerImpl& layer(std::uint32_t local) { return *layers_[local]; }
    Layer sharedLayer(std::uint32_t local) const { return layers_[local]; }
    // Whether model layer `index` is one of this Gpt's.
    bool holds(std::uint32_t index) const { return index >= first_ && index < first_ + numLayers(); }
    // Runs all built layers in order.
    torch::Tensor forward(torch::Tensor x);
    // The summed cross-entropy of the output layer's logits (split over the
    // vocabulary in a tensor-parallel stage: the stage's ranks compute it together).
    torch::Tensor lossSum(const torch::Tensor& logits, const torch::Tensor& targets) const;
    TensorSlice& slice() const { return *slice_; }
    const SliceHandle& sliceHandle() const { return slice_; }
    void to(torch::Device device, torch::Dtype dtype = torch::kFloat32);
    std::vector<torch::Tensor> parameters();
    // The .grad() of every parameter that has one (sharing their storage).
    std::vector<torch::Tensor> gradients();

private:
    arch::ModelConfig config_;
    std::uint32_t first_ = 0;
    std::vector<Layer> layers_;
    SliceHandle slice_;
};

// Mean cross-entropy would depend on how a batch is split; this is the sum.
// logits (B, T, V), targets (B, T) -> scalar
torch::Tensor crossEntropySum(const torch::Tensor& logits, const torch::Tensor& targets);

}  // namespace kiln::model
