#include "kiln/model/gpt.hpp"

#include "kiln/base/hash.hpp"
#include "kiln/model/autocast_scope.hpp"

#include "kiln/model/tensor_parallel.hpp"
#include "layer_parts.hpp"

#include <cmath>

namespace kiln::model {
namespace {

using detail::kInitStd;
using detail::ShardedParameters;

class EmbeddingLayer final : public LayerImpl {
public:
    EmbeddingLayer(const arch::ModelConfig& c, SliceHandle slice)
        : slice_(std::move(slice)), vocab_(arch::unitRange(c.vocabSize, slice_->width, slice_->rank)) {
        ShardedParameters param(*this, c, 0, *slice_);
        tokens_ = param("token_embedding", detail::initialTokenTable(c));
        positions_ = param("position_embedding", torch::randn({c.seqLen, c.dModel}) * kInitStd);
    }
    torch::Tensor forward(const torch::Tensor& ids) override {  // (B, T) int64
        const auto T = ids.size(1);
        return detail::embedTokens(tokens_, ids, vocab_, *slice_) + positions_.slice(0, 0, T).unsqueeze(0);
    }
    const char* kind() const override { return "embedding"; }

private:
    SliceHandle slice_;
    arch::UnitRange vocab_;
    torch::Tensor tokens_, positions_;
};

class TransformerBlock final : public LayerImpl {
public:
    TransformerBlock(const arch::ModelConfig& c, std::uint32_t index, SliceHandle slice)
        : slice_(std::move(slice)), heads_(arch::unitRange(c.heads, slice_->width, slice_->rank).count()),
          headDim_(c.dModel / c.heads), recomputeAttention_(c.recompute == arch::ModelConfig::Recompute::Selective) {
        const int64_t C = c.dModel, H = static_cast<int64_t>(c.mlpRatio) * c.dModel;
        const double residualStd = detail::residualInitStd(c);
        ShardedParameters param(*this, c, index, *slice_);
        ln1Weight_ = param("ln1_weight", torch::ones({C}));
        ln1Bias_ = param("ln1_bias", torch::zeros({C}));
        qkvWeight_ = param("qkv_weight", torch::randn({3 * C, C}) * kInitStd);
        qkvBias_ = param("qkv_bias", torch::zeros({3 * C}));
        projWeight_ = param("proj_weight", torch::randn({C, C}) * residualStd);
        projBias_ = param("proj_bias", torch::zeros({C}));
        ln2Weight_ = param("ln2_weight", torch::ones({C}));
        ln2Bias_ = param("ln2_bias", torch::zeros({C}));
        fcWeight_ = param("fc_weight", torch::randn({H, C}) * kInitStd);
        fcBias_ = param("fc_bias", torch::zeros({H}));
        outWeight_ = param("out_weight", torch::randn({C, H}) * residualStd);
        outBias_ = param("out_bias", torch::zeros({C}));
    }

    torch::Tensor forward(const torch::Tensor& x) override {  // (B, T, C)
        const auto B = x.size(0), T = x.size(1), C = x.size(2), hd = headDim_;
        // Split over the stage: this rank's heads and MLP neurons; the
        // projections back to C are partial sums, completed by one sum each.
        auto h = copyToSlices(torch::layer_norm(x, {C}, ln1Weight_, ln1Bias_), *slice_);
        auto qkv = torch::linear(h, qkvWeight_, qkvBias_).view({B, T, 3, heads_, hd}).permute({2, 0, 3, 1, 4});
        auto q = qkv[0], k = qkv[1], v = qkv[2];  // (B, heads, T, hd)
        auto attended = detail::causalAttention(q, k, v, recomputeAttention_).transpose(1, 2).reshape({B, T, heads_ * hd});
        if (!slice_->split()) {
            auto y = x + torch::linear(attended, projWeight_, projBias_);
            auto m = torch::layer_norm(y, {C}, ln2Weight_, ln2Bias_);
            return y + torch::linear(torch::gelu(torch::linear(m, fcWeight_, fcBias_), "tanh"), outWeight_, outBias_);
        }
        auto y = x + sumOverSlices(torch::linear(attended, projWeight_), *slice_) + projBias_;
        auto m = copyToSlices(torch::layer_norm(y, {C}, ln2Weight_, ln2Bias_), *slice_);
        auto neurons = torch::gelu(torch::linear(m, fcWeight_, fcBias_), "tanh");
        return y + sumOverSlices(torch::linear(neurons, outWeight_), *slice_) + outBias_;
    }
    const char* kind() const override { return "block"; }

private:
    SliceHandle slice_;
    int64_t heads_, headDim_;
    bool recomputeAttention_;
    torch::Tensor ln1Weight_, ln1Bias_, qkvWeight_, qkvBias_, projWeight_, projBias_;
    torch::Tensor ln2Weight_, ln2Bias_, fcWeight_, fcBias_, outWeight_, outBias_;
};

class OutputLayer final : public LayerImpl {
public:
    OutputLayer(const arch::ModelConfig& c, SliceHandle slice) : slice_(std::move(slice)) {
        ShardedParameters param(*this, c, c.numLayers() - 1, *slice_);
        lnWeight_ = param("ln_weight", torch::ones({c.dModel}));
        lnBias_ = param("ln_bias", torch::zeros({c.dModel}));
        head_ = param("head_weight", c.tieEmbeddings ? detail::initialTokenTable(c)
                                                     : torch::randn({c.vocabSize, c.dModel}) * kInitStd);
    }
    // (B, T, C) -> (B, T, V), or this rank's columns of the vocabulary in a split stage.
    torch::Tensor forward(const torch::Tensor& x) override {
        return torch::linear(copyToSlices(torch::layer_norm(x, {x.size(2)}, lnWeight_, lnBias_), *slice_), head_);
    }
    const char* kind() const override { return "output"; }

private:
    SliceHandle slice_;
    torch::Tensor lnWeight_, lnBias_, head_;
};

}  // namespace

namespace detail {

std::uint64_t layerSeed(const arch::ModelConfig& config, std::uint32_t index) {
    return base::mix64(config.seed ^ base::mix64(0x6c61796572ull + index));
}

torch::Tensor initialTokenTable(const arch::ModelConfig& c) {
    torch::manual_seed(layerSeed(c, 0));
    return torch::randn({c.vocabSize, c.dModel}) * kInitStd;
}

torch::Tensor embedTokens(const torch::Tensor& table, const torch::Tensor& ids, arch::UnitRange vocab, TensorSlice& slice) {
    if (!slice.split()) return torch::embedding(table, ids);
    const auto local = ids - vocab.first;
    const auto mine = (local >= 0).logical_and(local < vocab.count());
    const auto rows = torch::embedding(table, local.clamp(0, vocab.count() - 1)) * mine.unsqueeze(-1);
    return sumOverSlices(rows, slice);
}

namespace {

torch::Tensor attentionCore(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, std::int64_t window) {
    const auto T = q.size(2);
    const bool sliding = window > 0 && window < T;  // a window as long as the sequence is plain causal attention
#if TORCH_VERSION_MAJOR >= 2
    if (!sliding) return at::scaled_dot_product_attention(q, k, v, {}, 0.0, /*is_causal=*/true);
    // True where a position may look: at itself and the window - 1 before it.
    const auto ones = torch::ones({T, T}, torch::TensorOptions().dtype(torch::kBool).device(q.device()));
    const auto allowed = ones.tril(0).logical_and(ones.triu(-(window - 1)));
    return at::scaled_dot_product_attention(q, k, v, allowed, 0.0, /*is_causal=*/false);
#else
    auto scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(q.size(3)));
    const auto ones = torch::ones({T, T}, torch::TensorOptions().dtype(torch::kBool).device(q.device()));
    auto mask = ones.triu(1);
    if (sliding) mask = mask.logical_or(ones.tril(-window));
    return torch::matmul(torch::softmax(scores.masked_fill(mask, -INFINITY), -1), v);
#endif
}

// Attention whose backward runs its forward again: only q, k and v are kept.
struct RecomputedAttention : torch::autograd::Function<RecomputedAttention> {
    static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& q, const torch::Tensor& k,
                                 const torch::Tensor& v, std::int64_t window) {
        ctx->save_for_backward({q, k, v});
        ctx->saved_data["window"] = window;
        // Recomputed as computed: under bf16 autocast if the forward was.
#if TORCH_VERSION_MAJOR >= 2
        ctx->saved_data["bf16"] = at::autocast::is_autocast_enabled(q.device().type());
#else
        ctx->saved_data["bf16"] = q.is_cuda() ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
#endif
        return attentionCore(q, k, v, window);  // autograd records nothing inside a Function's forward
    }
    static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::tensor_list gradients) {
        const auto saved = ctx->get_saved_variables();
        std::vector<torch::Tensor> inputs;
        for (const auto& t : saved) inputs.push_back(t.detach().requires_grad_(true));
        torch::Tensor out;
        {
            torch::AutoGradMode enable(true);
            AutocastScope autocast(ctx->saved_data["bf16"].toBool(), inputs[0].device(), AutocastScope::Cache::KeepForStep);
            out = attentionCore(inputs[0], inputs[1], inputs[2], ctx->saved_data["window"].toInt());
        }
        auto grads = torch::autograd::grad({out}, inputs, {gradients[0]});
        grads.emplace_back();  // the window takes no gradient
        return grads;
    }
};

}  // namespace

torch::Tensor causalAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, bool recompute,
                              std::int64_t window) {
    if (recompute && torch::GradMode::is_enabled()) return RecomputedAttention::apply(q, k, v, window);
    return attentionCore(q, k, v, window);
}

}  // namespace detail

Layer buildLayer(const arch::ModelConfig& config, std::uint32_t index, SliceHandle slice, RouterHandle router) {
    if (!slice) slice = std::make_shared<TensorSlice>();
    // A generator seeded from (seed, index) alone, held for the construction:
    // the weights do not depend on which rank builds the layer, or in which order.
    torch::manual_seed(detail::layerSeed(config, index));
    if (config.llama()) return detail::buildLlamaLayer(config, index, std::move(slice), std::move(router));
    if (index == 0) return std::make_shared<EmbeddingLayer>(config, std::move(slice));
    if (index == config.numLayers() - 1) return std::make_shared<OutputLayer>(config, std::move(slice));
    return std::make_shared<TransformerBlock>(config, index, std::move(slice));
}

Gpt::Gpt(const arch::ModelConfig& config, std::uint32_t first, std::uint32_t last, SliceHandle slice, RouterHandle router)
    : config_(config), first_(first), slice_(slice ? std::move(slice) : std::make_shared<TensorSlice>()) {
    last = std::min(last, config.numLayers());
    for (std::uint32_t i = first; i < last; ++i) layers_.push_back(buildLayer(config, i, slice_, router));
}

Gpt::Gpt(const arch::ModelConfig& config, std::uint32_t first, std::vector<Layer> layers, SliceHandle slice)
    : config_(config), first_(first), layers_(std::move(layers)),
      slice_(slice ? std::move(slice) : std::make_shared<TensorSlice>()) {}

torch::Tensor Gpt::lossSum(const torch::Tensor& logits, const torch::Tensor& targets) const {
    if (!slice_->split()) return crossEntropySum(logits, targets);
    return vocabParallelCrossEntropySum(logits, targets, arch::unitRange(config_.vocabSize, slice_->width, slice_->rank).first,
                                        *slice_);
}

torch::Tensor Gpt::forward(torch::Tensor x) {
    for (auto& layer : layers_) x = layer->forward(x);
    return x;
}

void Gpt::to(torch::Device device, torch::Dtype dtype) {
    for (auto& layer : layers_) layer->to(device, dtype);
}

std::vector<torch::Tensor> Gpt::parameters() {
    std::vector<torch::Tensor> all;
    for (auto& layer : layers_)
        for (auto& p : layer->parameters()) all.push_back(p);
    return all;
}

std::vector<torch::Tensor> Gpt::gradients() {
    std::vector<torch::Tensor> all;
    for (auto& p : parameters())
        if (p.grad().defined()) all.push_back(p.grad());
    return all;
}

torch::Tensor crossEntropySum(const torch::Tensor& logits, const torch::Tensor& targets) {
    return torch::nn::functional::cross_entropy(
        logits.reshape({-1, logits.size(-1)}).to(torch::kFloat32), targets.reshape({-1}),
        torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum));
}

}  // namespace kiln::model
