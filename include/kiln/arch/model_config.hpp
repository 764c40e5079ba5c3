// The shape of the model, from the deck (no torch here: the planner and the
// deck checks use it too).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kiln::config {
class Deck;
}

namespace kiln::arch {

// The architectures kiln trains. Gpt2: learned positions, LayerNorm with
// biases, GELU MLP, multi-head attention. Llama (Llama 2/3, Mistral, Qwen,
// SmolLM): RMSNorm, rotary positions, SwiGLU MLP, grouped-query attention, no
// biases but Qwen 2's on q, k and v, Qwen 3's RMSNorm of q and k per head.
enum class Family : std::uint32_t { Gpt2 = 0, Llama = 1 };
const char* familyName(Family family);

// How the rotary embeddings' frequencies are scaled for a context longer than the one a model was first
// trained on, as Hugging Face transformers computes each (its rope_type): none ('default'); linear, every
// frequency divided by `factor`; llama3 (Llama 3.1-3.3), low frequencies divided by `factor`, high ones kept,
// those between blended; yarn (Qwen 2.5's and DeepSeek's long-context configs), a ramp between the two
// over the dimensions, and the cosines and sines multiplied by an attention factor.
struct RopeScaling {
    enum class Kind : std::uint32_t { None = 0, Linear = 1, Llama3 = 2, Yarn = 3 } kind = Kind::None;
    double factor = 1.0;
    double lowFreqFactor = 1.0, highFreqFactor = 4.0;  // llama3
    std::uint32_t originalContext = 0;  // llama3, yarn: original_max_position_embeddings
    double betaFast = 32.0, betaSlow = 1.0;  // yarn: the ramp's bounds, in rotations
    double attentionFactor = 0.0;  // yarn: 0 = 0.1 ln(factor) + 1 (transformers' default)
    // Yarn's multiplier of the cosines and sines (1 for the others).
    double attentionScaling() const;
    bool operator==(const RopeScaling&) const = default;
};
const char* ropeScalingName(RopeScaling::Kind kind);
// "llama3 factor 8, low/high frequency factors 1/4, original context 8192", or "none".
std::string ropeScalingText(const RopeScaling& rope);

// A sparse MLP in place of the dense one in every block (mixture of experts, as Mixtral, Qwen 3's MoE models
// and OLMoE have it): a router scores each token against `count` SwiGLU experts of `width` neurons, the token
// goes to its top `perToken` and comes back as their outputs weighted by the router's softmax (taken over all
// experts and kept for the chosen ones: before top-k, OLMoE's; or renormalised over the chosen ones: after
// top-k, Mixtral's). Dropless: every token reaches every expert it chose. A shared SwiGLU of `sharedWidth`
// (DeepSeek's shared experts) sees every token beside them. The router's auxiliary losses are computed per
// sequence and layer, so that no layout, microbatch or width changes them (arch/router_losses in DESIGN.md).
struct Experts {
    std::uint32_t count = 0;        // model.experts; 0: the dense MLP
    std::uint32_t perToken = 0;     // model.experts_per_token (top-k)
    std::uint32_t width = 0;        // model.expert_hidden: an expert's SwiGLU width
    std::uint32_t sharedWidth = 0;  // model.shared_expert_hidden; 0: none
    enum class Softmax : std::uint32_t { AfterTopK = 0, BeforeTopK = 1 } softmax = Softmax::AfterTopK;
    double auxLossCoef = 0.0;  // model.router_aux_loss: the load-balancing loss's weight
    double zLossCoef = 0.0;    // model.router_z_loss: the router z-loss's weight
    bool any() const { return count > 0; }
    bool operator==(const Experts&) const = default;
};
const char* routerSoftmaxName(Experts::Softmax softmax);

struct ModelConfig {
    Family family = Family::Gpt2;
    std::uint32_t vocabSize = 0;  // from the tokenizer of the data
    std::uint32_t blocks = 2;     // transformer blocks
    std::uint32_t dModel = 64;
    std::uint32_t heads = 4;
    std::uint32_t mlpRatio = 4;   // gpt2: the MLP is mlpRatio * dModel wide
    std::uint32_t kvHeads = 0;    // llama: key/value heads (grouped-query attention); 0 = heads
    std::uint32_t ffnHidden = 0;  // llama: the SwiGLU MLP's width
    double normEps = 1e-5;        // llama: RMSNorm's epsilon
    double ropeTheta = 10000.0;   // llama: rotary embeddings' base
    RopeScaling rope;             // llama: their scaling for long contexts (model.rope_scaling)
    std::uint32_t headDimension = 0;  // llama: a head's width when not d_model / heads (model.head_dim; Qwen 3)
    bool qkvBias = false;         // llama: biases on q, k and v (model.qkv_bias; Qwen 2 and 2.5)
    bool qkNorm = false;          // llama: RMSNorm of each query and key head before rotation (model.qk_norm; Qwen 3)
    // llama: the q and k norms span the whole projection (heads x head_dim weights), as OLMoE has them, rather
    // than one head (model.qk_norm_over = projection).
    bool qkNormProjection = false;
    Experts experts;              // llama: a mixture of experts in place of the dense MLP (model.experts)
    std::uint32_t slidingWindow = 0;  // llama: positions a query sees, itself included (model.sliding_window; 0: all)
    // The transformers class kiln export writes (model.hf_architecture; "": the one the shape implies). Not the
    // maths: a Mistral v0.3 is a Llama, and comes back as MistralForCausalLM only by name.
    std::string hfArchitecture;
    // The head is the token embedding (model.tie_embeddings). The last stage
    // keeps its own copy of it (the output layer's head_weight), which the
    // gradient sums and AdamW keep equal to the first stage's: one parameter,
    // held twice (train/gradient_sync.hpp).
    bool tieEmbeddings = false;
    std::uint32_t seqLen = 64;
    // llama: the context the model declares (model.max_positions; Hugging Face's max_position_embeddings),
    // kept through checkpoints and export whatever data.seq_len a run trains at; 0: data.seq_len.
    std::uint32_t maxPositions = 0;
    std::uint64_t seed = 1234;
    // How activations are kept for backward (train.recompute): none, selective
    // (attention's core recomputed, its T x T scores never kept) or full (only
    // each layer's input kept; the layer recomputed in backward), or auto (full
    // on the stages that would not fit in memory without, as the planner
    // decides: RankRole::recompute). Not a shape: checkpoints do not record it.
    enum class Recompute { None, Selective, Full, Auto } recompute = Recompute::None;

    bool llama() const { return family == Family::Llama; }
    // The positions the model declares: GPT-2's learned rows (data.seq_len), a llama's max_positions.
    std::uint32_t contextLength() const { return llama() && maxPositions > seqLen ? maxPositions : seqLen; }
    std::uint32_t headDim() const { return llama() && headDimension != 0 ? headDimension : dModel / heads; }
    // The queries' width, heads x head_dim (d_model unless head_dim is set apart).
    std::uint32_t queryWidth() const { return heads * headDim(); }
    std::uint32_t keyValueHeads() const { return llama() && kvHeads != 0 ? kvHeads : heads; }
    // The MLP's hidden width.
    std::uint32_t mlpWidth() const { return llama() ? ffnHidden : mlpRatio * dModel; }
    // Layers of the ordered list: embedding, the blocks, the output (final norm + head).
    std::uint32_t numLayers() const { return blocks + 2; }
    // Parameters of layer i as it holds them (for planning: the tied head counts).
    std::uint64_t parametersOf(std::uint32_t layer) const;
    // The model's parameters (a tied head counted once, as the embedding).
    std::uint64_t parameters() const;
    // Those one token passes through: of each block's experts only the perToken it is routed to (all of a
    // dense model's).
    std::uint64_t activeParameters() const;
    // The index of the token embedding in layer 0 and of the head in the last
    // layer, in parameterShapes() order (both families).
    static constexpr std::size_t kTokenEmbedding = 0;
    std::size_t headIndex() const { return llama() ? 1 : 2; }
    // Whether parameter k of `layer` is the tied head: the copy of the embedding.
    bool isTiedHead(std::uint32_t layer, std::size_t k) const {
        return tieEmbeddings && layer == numLayers() - 1 && k == headIndex();
    }
    // Layer i's parameters as the layer names them, with their shapes, in the
    // layer's order (what a checkpoint holds), without building the layer.
    std::vector<std::pair<std::string, std::vector<std::int64_t>>> parameterShapes(std::uint32_t layer) const;
    // "llama, 32 blocks, d_model 4096, 32 heads (8 key/value), SwiGLU 14336, rope_theta 500000" or the gpt2 equivalent.
    std::string shapeText() const;
    // Forward FLOPs of one token through layer i (matmuls, 2 per multiply-add; attention included).
    double forwardFlopsPerToken(std::uint32_t layer) const;
    // Of those, attention's core (scores and weighted sum; 0 outside the blocks): what selective
    // recomputation runs again.
    double attentionFlopsPerToken(std::uint32_t layer) const;
};

// `tokenizerVocab` is the data's vocabulary (0 when unknown). model.vocab, when
// set, must agree with it; at least one of the two must be known.
// model.preset, when set, gives the shape keys the deck leaves at their defaults.
ModelConfig modelConfigFromDeck(const config::Deck& deck, std::uint32_t tokenizerVocab);
// train.recompute's words for ModelConfig::Recompute, and back (InputError for another word).
const char* recomputeName(ModelConfig::Recompute recompute);
ModelConfig::Recompute recomputeFromName(const std::string& name);

// The Llama rule for the SwiGLU width: 8/3 of d_model, rounded up to a multiple of 256.
std::uint32_t llamaFfnHidden(std::uint32_t dModel);

}  // namespace kiln::arch
