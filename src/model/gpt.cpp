#include "kiln/model/gpt.hpp"

#include "kiln/data/keyed_permutation.hpp"

#include <cmath>

namespace kiln::model {
namespace {

constexpr double kInitStd = 0.02;

class EmbeddingLayer final : public LayerImpl {
public:
    explicit EmbeddingLayer(const ModelConfig& c) {
        tokens_ = register_parameter("token_embedding", torch::randn({c.vocabSize, c.dModel}) * kInitStd);
        positions_ = register_parameter("position_embedding", torch::randn({c.seqLen, c.dModel}) * kInitStd);
    }
    torch::Tensor forward(const torch::Tensor& ids) override {  // (B, T) int64
        const auto T = ids.size(1);
        return torch::embedding(tokens_, ids) + positions_.slice(0, 0, T).unsqueeze(0);
    }
    const char* kind() const override { return "embedding"; }

private:
    torch::Tensor tokens_, positions_;
};

class TransformerBlock final : public LayerImpl {
public:
    TransformerBlock(const ModelConfig& c) : heads_(c.heads) {
        const int64_t C = c.dModel, H = static_cast<int64_t>(c.mlpRatio) * c.dModel;
        // GPT-2 style: residual projections scaled down by sqrt(2 * blocks).
        const double residualStd = kInitStd / std::sqrt(2.0 * c.blocks);
        ln1Weight_ = register_parameter("ln1_weight", torch::ones({C}));
        ln1Bias_ = register_parameter("ln1_bias", torch::zeros({C}));
        qkvWeight_ = register_parameter("qkv_weight", torch::randn({3 * C, C}) * kInitStd);
        qkvBias_ = register_parameter("qkv_bias", torch::zeros({3 * C}));
        projWeight_ = register_parameter("proj_weight", torch::randn({C, C}) * residualStd);
        projBias_ = register_parameter("proj_bias", torch::zeros({C}));
        ln2Weight_ = register_parameter("ln2_weight", torch::ones({C}));
        ln2Bias_ = register_parameter("ln2_bias", torch::zeros({C}));
        fcWeight_ = register_parameter("fc_weight", torch::randn({H, C}) * kInitStd);
        fcBias_ = register_parameter("fc_bias", torch::zeros({H}));
        outWeight_ = register_parameter("out_weight", torch::randn({C, H}) * residualStd);
        outBias_ = register_parameter("out_bias", torch::zeros({C}));
    }

    torch::Tensor forward(const torch::Tensor& x) override {  // (B, T, C)
        const auto B = x.size(0), T = x.size(1), C = x.size(2), hd = C / heads_;
        auto h = torch::layer_norm(x, {C}, ln1Weight_, ln1Bias_);
        auto qkv = torch::linear(h, qkvWeight_, qkvBias_).view({B, T, 3, heads_, hd}).permute({2, 0, 3, 1, 4});
        auto q = qkv[0], k = qkv[1], v = qkv[2];  // (B, heads, T, hd)
#if TORCH_VERSION_MAJOR >= 2
        auto attended = at::scaled_dot_product_attention(q, k, v, {}, 0.0, /*is_causal=*/true);
#else
        auto scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(hd));
        auto mask = torch::ones({T, T}, torch::TensorOptions().dtype(torch::kBool).device(x.device())).triu(1);
        auto attended = torch::matmul(torch::softmax(scores.masked_fill(mask, -INFINITY), -1), v);
#endif
        auto y = x + torch::linear(attended.transpose(1, 2).reshape({B, T, C}), projWeight_, projBias_);
        auto m = torch::layer_norm(y, {C}, ln2Weight_, ln2Bias_);
        return y + torch::linear(torch::gelu(torch::linear(m, fcWeight_, fcBias_), "tanh"), outWeight_, outBias_);
    }
    const char* kind() const override { return "block"; }

private:
    int64_t heads_;
    torch::Tensor ln1Weight_, ln1Bias_, qkvWeight_, qkvBias_, projWeight_, projBias_;
    torch::Tensor ln2Weight_, ln2Bias_, fcWeight_, fcBias_, outWeight_, outBias_;
};

class OutputLayer final : public LayerImpl {
public:
    explicit OutputLayer(const ModelConfig& c) {
        lnWeight_ = register_parameter("ln_weight", torch::ones({c.dModel}));
        lnBias_ = register_parameter("ln_bias", torch::zeros({c.dModel}));
        head_ = register_parameter("head_weight", torch::randn({c.vocabSize, c.dModel}) * kInitStd);
    }
    torch::Tensor forward(const torch::Tensor& x) override {  // (B, T, C) -> (B, T, V)
        return torch::linear(torch::layer_norm(x, {x.size(2)}, lnWeight_, lnBias_), head_);
    }
    const char* kind() const override { return "output"; }

private:
    torch::Tensor lnWeight_, lnBias_, head_;
};

}  // namespace

Layer buildLayer(const ModelConfig& config, std::uint32_t index) {
    // A generator seeded from (seed, index) alone, held for the construction:
    // the weights do not depend on which rank builds the layer, or in which order.
    torch::manual_seed(data::mix64(config.seed ^ data::mix64(0x6c61796572ull + index)));
    if (index == 0) return std::make_shared<EmbeddingLayer>(config);
    if (index == config.numLayers() - 1) return std::make_shared<OutputLayer>(config);
    return std::make_shared<TransformerBlock>(config);
}

Gpt::Gpt(const ModelConfig& config, std::uint32_t first, std::uint32_t last) : config_(config), first_(first) {
    last = std::min(last, config.numLayers());
    for (std::uint32_t i = first; i < last; ++i) layers_.push_back(buildLayer(config, i));
}

Gpt::Gpt(const ModelConfig& config, std::uint32_t first, std::vector<Layer> layers)
    : config_(config), first_(first), layers_(std::move(layers)) {}

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
