// What the layers of both families share: the initial weights' scale and the
// registration of a layer's parameters as this rank's shards (internal to the model module).
#pragma once

#include "kiln/model/gpt.hpp"
#include "kiln/arch/shard_spec.hpp"
#include "kiln/model/tensor_parallel.hpp"

#include <cmath>
#include <string>
#include <vector>

namespace kiln::model::detail {

constexpr double kInitStd = 0.02;

// Residual projections (into the residual stream) scaled down by sqrt(2 * blocks), as GPT-2 does.
inline double residualInitStd(const arch::ModelConfig& c) { return kInitStd / std::sqrt(2.0 * c.blocks); }

// Registers a layer's parameters in parameterShapes() order, each the
// slice's shard of the whole tensor it is given: the whole tensor is drawn
// alike on every rank, so a shard holds exactly the values the unsplit layer has.
class ShardedParameters {
public:
    ShardedParameters(torch::nn::Module& module, const arch::ModelConfig& c, std::uint32_t layer, const TensorSlice& slice)
        : module_(module), specs_(arch::shardSpecs(c, layer)), slice_(slice) {}
    torch::Tensor operator()(const std::string& name, const torch::Tensor& whole) {
        return module_.register_parameter(name, shardOf(whole, specs_.at(next_++), slice_.width, slice_.rank));
    }

private:
    torch::nn::Module& module_;
    std::vector<arch::ShardSpec> specs_;
    const TensorSlice& slice_;
    std::size_t next_ = 0;
};

// The generator seed of layer `index`'s initial weights.
std::uint64_t layerSeed(const arch::ModelConfig& config, std::uint32_t index);
// The token embedding's initial values (V x d_model), drawn from layer 0's
// seed: the embedding's, and a tied head's, the same on every rank that builds either.
torch::Tensor initialTokenTable(const arch::ModelConfig& config);

// Token embedding rows, split over the vocabulary in a split stage: the
// other ranks' ids look up zeros, and the sum over the stage completes every row.
torch::Tensor embedTokens(const torch::Tensor& table, const torch::Tensor& ids, arch::UnitRange vocab, TensorSlice& slice);

// Causal attention of (B, heads, T, hd) queries, keys and values. With
// `recompute` (train.recompute = selective) backward recomputes it from q, k
// and v, so that nothing of its inside (the T x T scores and probabilities,
// written out before libtorch 2) is kept between forward and backward. A
// `window` > 0 (sliding-window attention, Mistral v0.1's) lets position i
// see positions i - window + 1 to i only, as transformers masks it.
torch::Tensor causalAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                              bool recompute = false, std::int64_t window = 0);

// A block's mixture of experts in place of its dense MLP (expert_mlp.cpp): the router, the experts (this
// rank's, whole experts, in a split stage) and the shared expert (its neurons), registered by `param` in
// parameterShapes() order.
class ExpertMlp {
public:
    // `router`: where its routing is recorded and its losses' gradient scale is read (none: its own log).
    ExpertMlp(const arch::ModelConfig& config, std::uint32_t layer, ShardedParameters& param, SliceHandle slice,
              RouterHandle router = {});
    // m (B, T, C), whole on every rank of the stage, -> this rank's part of the MLP's output (B, T, C): its
    // experts' contributions to the tokens routed to them (and its shared neurons'), completed by the stage's sum.
    torch::Tensor forward(const torch::Tensor& m);

private:
    // This rank's experts run on their tokens: `tokenOfPair` (on the tokens' device) the token of each routed
    // pair in expert order, `count` the pairs of each local expert; their outputs in the same order (pairs, C).
    torch::Tensor localExperts(const torch::Tensor& tokens, const torch::Tensor& tokenOfPair,
                               const std::vector<std::int64_t>& count) const;
    arch::Experts experts_;
    std::uint32_t block_;
    SliceHandle slice_;
    RouterHandle log_;  // the model's router log
    arch::UnitRange mine_;  // this rank's experts
    torch::Tensor router_, gate_, up_, down_;  // (E, C); (E_mine, He, C), (E_mine, He, C), (E_mine, C, He)
    torch::Tensor sharedGate_, sharedUp_, sharedDown_;  // undefined without a shared expert
};

// The llama family's layers (llama_layers.cpp).
Layer buildLlamaLayer(const arch::ModelConfig& config, std::uint32_t index, SliceHandle slice, RouterHandle router);

}  // namespace kiln::model::detail
