// The llama family's layers, numerically Hugging Face's LlamaForCausalLM:
//   embedding   token rows only (positions are rotary, inside attention)
//   block       x + o(attention(rope(q), rope(k), v) of RMSNorm(x)), then
//               y + down(silu(gate(m)) * up(m)) of m = RMSNorm(y), or of a mixture
//               of experts (expert_mlp.cpp: Mixtral, Qwen 3 MoE, OLMoE); no biases
//               but q, k and v's (Qwen 2), q and k RMSNormed per head before
//               the rotation (Qwen 3) or over the whole projection (OLMoE), heads
//               of head_dim apart from C / heads
//   output      RMSNorm, head to the vocabulary
// Rotary embeddings use the "rotate half" convention of Hugging Face's
// checkpoints (the two halves of a head's dimensions are the pairs), so that
// their q and k weights load as they are.
#include "kiln/model/llama_ops.hpp"
#include "layer_parts.hpp"

namespace kiln::model {

torch::Tensor rmsNorm(const torch::Tensor& x, const torch::Tensor& weight, double eps) {
    // At least float32 (bf16 is widened; float64, used to check gradients, is kept).
    const auto x32 = x.to(c10::promoteTypes(x.scalar_type(), torch::kFloat32));
    const auto normed = x32 * torch::rsqrt(x32.pow(2).mean(-1, /*keepdim=*/true) + eps);
    return weight * normed.to(x.scalar_type());
}

torch::Tensor rotaryInverseFrequencies(std::int64_t headDim, double theta, const arch::RopeScaling& rope,
                                       const torch::Device& device) {
    using Kind = arch::RopeScaling::Kind;
    const auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(device);
    // float32 throughout, as transformers computes them (modeling_rope_utils), so that the angles agree bit for bit.
    const auto powers = torch::pow(theta, torch::arange(0, headDim, 2, f32) / static_cast<double>(headDim));
    const auto inverse = 1.0 / powers;
    switch (rope.kind) {
        case Kind::None: return inverse;
        case Kind::Linear: return inverse / rope.factor;
        case Kind::Llama3: {
            const double context = rope.originalContext;
            const double lowWavelength = context / rope.lowFreqFactor, highWavelength = context / rope.highFreqFactor;
            const auto wavelength = 2 * M_PI / inverse;
            auto scaled = torch::where(wavelength > lowWavelength, inverse / rope.factor, inverse);
            const auto smooth = (context / wavelength - rope.lowFreqFactor) / (rope.highFreqFactor - rope.lowFreqFactor);
            const auto smoothed = (1 - smooth) * scaled / rope.factor + smooth * scaled;
            const auto medium = (wavelength >= highWavelength).logical_and(wavelength <= lowWavelength);
            return torch::where(medium, smoothed, scaled);
        }
        case Kind::Yarn: {
            // The dimension whose wavelength turns `rotations` times over the original context, and the ramp
            // between beta_fast's and beta_slow's dimensions (whole dimensions, as transformers' truncate).
            const auto dimensionOf = [&](double rotations) {
                return headDim * std::log(rope.originalContext / (rotations * 2 * M_PI)) / (2 * std::log(theta));
            };
            double low = std::max(std::floor(dimensionOf(rope.betaFast)), 0.0);
            double high = std::min(std::ceil(dimensionOf(rope.betaSlow)), static_cast<double>(headDim - 1));
            if (low == high) high += 0.001;
            const auto ramp = ((torch::arange(headDim / 2, f32) - low) / (high - low)).clamp(0, 1);
            const auto extrapolation = 1 - ramp;
            const auto interpolated = 1.0 / (rope.factor * powers);
            return interpolated * (1 - extrapolation) + inverse * extrapolation;
        }
    }
    return inverse;
}

RotaryAngles rotaryAngles(std::int64_t positions, std::int64_t headDim, double theta, const torch::Tensor& like,
                          const arch::RopeScaling& rope) {
    const auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(like.device());
    const auto inverse = rotaryInverseFrequencies(headDim, theta, rope, like.device());
    const auto angles = torch::outer(torch::arange(positions, f32), inverse);
    const auto both = torch::cat({angles, angles}, -1);
    const double scaling = rope.attentionScaling();
    if (scaling == 1.0) return {both.cos().to(like.scalar_type()), both.sin().to(like.scalar_type())};
    return {(both.cos() * scaling).to(like.scalar_type()), (both.sin() * scaling).to(like.scalar_type())};
}

torch::Tensor applyRotary(const torch::Tensor& x, const RotaryAngles& angles) {
    const auto halves = x.chunk(2, -1);
    return x * angles.cos + torch::cat({-halves[1], halves[0]}, -1) * angles.sin;
}

torch::Tensor applyRotary(const torch::Tensor& x, double theta) {
    return applyRotary(x, rotaryAngles(x.size(2), x.size(3), theta, x, arch::RopeScaling{}));
}

}  // namespace kiln::model

namespace kiln::model::detail {
namespace {

// RMSNorm over a projection of `width` features of which x (..., part) holds this rank's part: the squares are
// summed over the stage forward, and so are their gradients backward (every rank's part depends on the sum).
torch::Tensor splitRmsNorm(const torch::Tensor& x, const torch::Tensor& weight, double eps, std::int64_t width,
                           TensorSlice& slice) {
    const auto x32 = x.to(c10::promoteTypes(x.scalar_type(), torch::kFloat32));
    auto squares = x32.pow(2).sum(-1, /*keepdim=*/true);
    if (slice.split()) squares = sumOverSlices(copyToSlices(squares, slice), slice);
    const auto normed = x32 * torch::rsqrt(squares / static_cast<double>(width) + eps);
    return weight * normed.to(x.scalar_type());
}

class LlamaEmbedding final : public LayerImpl {
public:
    LlamaEmbedding(const arch::ModelConfig& c, SliceHandle slice)
        : slice_(std::move(slice)), vocab_(arch::unitRange(c.vocabSize, slice_->width, slice_->rank)) {
        ShardedParameters param(*this, c, 0, *slice_);
        tokens_ = param("token_embedding", initialTokenTable(c));
    }
    torch::Tensor forward(const torch::Tensor& ids) override { return embedTokens(tokens_, ids, vocab_, *slice_); }
    const char* kind() const override { return "embedding"; }

private:
    SliceHandle slice_;
    arch::UnitRange vocab_;
    torch::Tensor tokens_;
};

class LlamaBlock final : public LayerImpl {
public:
    LlamaBlock(const arch::ModelConfig& c, std::uint32_t index, SliceHandle slice, RouterHandle router)
        : slice_(std::move(slice)), heads_(arch::unitRange(c.heads, slice_->width, slice_->rank).count()),
          kvHeads_(arch::unitRange(c.keyValueHeads(), slice_->width, slice_->rank).count()), headDim_(c.headDim()),
          recomputeAttention_(c.recompute == arch::ModelConfig::Recompute::Selective),
          qkNormProjection_(c.qkNorm && c.qkNormProjection), queryWidth_(c.queryWidth()),
          keyValueWidth_(std::int64_t{c.keyValueHeads()} * c.headDim()), eps_(c.normEps), theta_(c.ropeTheta),
          rope_(c.rope), window_(c.slidingWindow) {
        const std::int64_t C = c.dModel, H = c.mlpWidth(), q = std::int64_t{c.heads} * headDim_,
                           kv = std::int64_t{c.keyValueHeads()} * headDim_;
        const double residualStd = residualInitStd(c);
        ShardedParameters param(*this, c, index, *slice_);
        attnNorm_ = param("attn_norm_weight", torch::ones({C}));
        qWeight_ = param("q_weight", torch::randn({q, C}) * kInitStd);
        kWeight_ = param("k_weight", torch::randn({kv, C}) * kInitStd);
        vWeight_ = param("v_weight", torch::randn({kv, C}) * kInitStd);
        if (c.qkvBias) {  // Qwen 2: zero at the start, as transformers initialises a linear layer's bias
            qBias_ = param("q_bias", torch::zeros({q}));
            kBias_ = param("k_bias", torch::zeros({kv}));
            vBias_ = param("v_bias", torch::zeros({kv}));
        }
        if (c.qkNorm) {  // Qwen 3's per head; OLMoE's over the whole projection (this rank's heads' part of it)
            qNorm_ = param("q_norm_weight", torch::ones({qkNormProjection_ ? q : headDim_}));
            kNorm_ = param("k_norm_weight", torch::ones({qkNormProjection_ ? kv : headDim_}));
        }
        oWeight_ = param("o_weight", torch::randn({C, q}) * residualStd);
        mlpNorm_ = param("mlp_norm_weight", torch::ones({C}));
        if (c.experts.any()) {
            experts_ = std::make_unique<ExpertMlp>(c, index, param, slice_, std::move(router));
            return;
        }
        gateWeight_ = param("gate_weight", torch::randn({H, C}) * kInitStd);
        upWeight_ = param("up_weight", torch::randn({H, C}) * kInitStd);
        downWeight_ = param("down_weight", torch::randn({C, H}) * residualStd);
    }

    torch::Tensor forward(const torch::Tensor& x) override {  // (B, T, C)
        const auto B = x.size(0), T = x.size(1);
        // Split over the stage: this rank's query heads with their key/value heads (the width divides the
        // key/value heads), and its MLP neurons; o and down leave partial sums, completed by one sum each.
        const auto h = copyToSlices(rmsNorm(x, attnNorm_, eps_), *slice_);
        // OLMoE's q/k norms span the projection, of which this rank holds its heads' part: normed before the
        // split into heads.
        const auto projected = [&](const torch::Tensor& weight, const torch::Tensor& bias, const torch::Tensor& norm,
                                   std::int64_t width) {
            const auto p = torch::linear(h, weight, bias);
            return qkNormProjection_ ? splitRmsNorm(p, norm, eps_, width, *slice_) : p;
        };
        const auto heads = [&](const torch::Tensor& projection, std::int64_t n) {
            return projection.view({B, T, n, headDim_}).transpose(1, 2);  // (B, n, T, hd)
        };
        // Qwen 3's q/k norms: one weight for every head, so each rank of a split stage holds it whole and its
        // heads give part of the gradient; copyToSlices sums those parts over the stage in backward.
        const auto normed = [&](torch::Tensor x, const torch::Tensor& weight) {
            return weight.defined() && !qkNormProjection_ ? rmsNorm(x, copyToSlices(weight, *slice_), eps_) : x;
        };
        const auto angles = rotaryAngles(T, headDim_, theta_, h, rope_);
        auto q = applyRotary(normed(heads(projected(qWeight_, qBias_, qNorm_, queryWidth_), heads_), qNorm_), angles);
        auto k = applyRotary(normed(heads(projected(kWeight_, kBias_, kNorm_, keyValueWidth_), kvHeads_), kNorm_), angles);
        auto v = heads(torch::linear(h, vWeight_, vBias_), kvHeads_);
        if (kvHeads_ < heads_) {  // each key/value head serves a group of consecutive query heads
            k = k.repeat_interleave(heads_ / kvHeads_, 1);
            v = v.repeat_interleave(heads_ / kvHeads_, 1);
        }
        const auto attended = causalAttention(q, k, v, recomputeAttention_, window_).transpose(1, 2).reshape({B, T, heads_ * headDim_});
        const auto y = x + sumOverSlices(torch::linear(attended, oWeight_), *slice_);
        const auto m = copyToSlices(rmsNorm(y, mlpNorm_, eps_), *slice_);
        if (experts_) return y + sumOverSlices(experts_->forward(m), *slice_);
        const auto neurons = torch::silu(torch::linear(m, gateWeight_)) * torch::linear(m, upWeight_);
        return y + sumOverSlices(torch::linear(neurons, downWeight_), *slice_);
    }
    const char* kind() const override { return "block"; }

private:
    SliceHandle slice_;
    std::int64_t heads_, kvHeads_, headDim_;
    bool recomputeAttention_, qkNormProjection_;
    std::int64_t queryWidth_, keyValueWidth_;  // the whole projections' widths (a split stage holds part of them)
    double eps_, theta_;
    arch::RopeScaling rope_;
    std::int64_t window_;  // sliding-window attention's span; 0: none
    torch::Tensor attnNorm_, qWeight_, kWeight_, vWeight_, oWeight_, mlpNorm_, gateWeight_, upWeight_, downWeight_;
    torch::Tensor qBias_, kBias_, vBias_, qNorm_, kNorm_;  // undefined unless the model has them
    std::unique_ptr<ExpertMlp> experts_;  // in place of gate, up and down in a mixture of experts
};

class LlamaOutput final : public LayerImpl {
public:
    LlamaOutput(const arch::ModelConfig& c, SliceHandle slice) : slice_(std::move(slice)), eps_(c.normEps) {
        ShardedParameters param(*this, c, c.numLayers() - 1, *slice_);
        norm_ = param("norm_weight", torch::ones({c.dModel}));
        head_ = param("head_weight",
                      c.tieEmbeddings ? initialTokenTable(c) : torch::randn({c.vocabSize, c.dModel}) * kInitStd);
    }
    // (B, T, C) -> (B, T, V), or this rank's columns of the vocabulary in a split stage.
    torch::Tensor forward(const torch::Tensor& x) override {
        return torch::linear(copyToSlices(rmsNorm(x, norm_, eps_), *slice_), head_);
    }
    const char* kind() const override { return "output"; }

private:
    SliceHandle slice_;
    double eps_;
    torch::Tensor norm_, head_;
};

}  // namespace

Layer buildLlamaLayer(const arch::ModelConfig& config, std::uint32_t index, SliceHandle slice, RouterHandle router) {
    if (index == 0) return std::make_shared<LlamaEmbedding>(config, std::move(slice));
    if (index == config.numLayers() - 1) return std::make_shared<LlamaOutput>(config, std::move(slice));
    return std::make_shared<LlamaBlock>(config, index, std::move(slice), std::move(router));
}

}  // namespace kiln::model::detail
