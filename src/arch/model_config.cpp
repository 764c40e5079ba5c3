#include "kiln/arch/model_config.hpp"

#include "kiln/arch/hf_families.hpp"
#include "kiln/base/error.hpp"
#include "kiln/config/deck.hpp"

#include <fmt/format.h>

#include <cmath>

namespace kiln::arch {

const char* familyName(Family family) { return family == Family::Llama ? "llama" : "gpt2"; }

const char* ropeScalingName(RopeScaling::Kind kind) {
    switch (kind) {
        case RopeScaling::Kind::Linear: return "linear";
        case RopeScaling::Kind::Llama3: return "llama3";
        case RopeScaling::Kind::Yarn: return "yarn";
        case RopeScaling::Kind::None: break;
    }
    return "none";
}

double RopeScaling::attentionScaling() const {
    if (kind != Kind::Yarn) return 1.0;
    if (attentionFactor > 0.0) return attentionFactor;
    return factor <= 1.0 ? 1.0 : 0.1 * std::log(factor) + 1.0;
}

std::string ropeScalingText(const RopeScaling& rope) {
    switch (rope.kind) {
        case RopeScaling::Kind::None: return "none";
        case RopeScaling::Kind::Linear: return fmt::format("linear factor {:g}", rope.factor);
        case RopeScaling::Kind::Llama3:
            return fmt::format("llama3 factor {:g}, low/high frequency factors {:g}/{:g}, original context {}", rope.factor,
                               rope.lowFreqFactor, rope.highFreqFactor, rope.originalContext);
        case RopeScaling::Kind::Yarn:
            return fmt::format("yarn factor {:g}, beta fast/slow {:g}/{:g}, original context {}, attention factor {:g}",
                               rope.factor, rope.betaFast, rope.betaSlow, rope.originalContext, rope.attentionScaling());
    }
    return "none";
}

const char* routerSoftmaxName(Experts::Softmax softmax) {
    return softmax == Experts::Softmax::BeforeTopK ? "before_topk" : "after_topk";
}

const char* recomputeName(ModelConfig::Recompute recompute) {
    switch (recompute) {
        case ModelConfig::Recompute::None: return "none";
        case ModelConfig::Recompute::Selective: return "selective";
        case ModelConfig::Recompute::Full: return "full";
        case ModelConfig::Recompute::Auto: return "auto";
    }
    return "?";
}

ModelConfig::Recompute recomputeFromName(const std::string& name) {
    for (auto r : {ModelConfig::Recompute::None, ModelConfig::Recompute::Selective, ModelConfig::Recompute::Full,
                   ModelConfig::Recompute::Auto})
        if (name == recomputeName(r)) return r;
    throw InputError(fmt::format("recompute mode '{}' is not none, selective, full or auto", name));
}

std::uint32_t llamaFfnHidden(std::uint32_t dModel) {
    const std::uint32_t eightThirds = (8 * dModel + 2) / 3;  // 8/3 d, rounded up
    return (eightThirds + 255) / 256 * 256;
}

std::uint64_t ModelConfig::parametersOf(std::uint32_t layer) const {
    std::uint64_t n = 0;
    for (const auto& [name, shape] : parameterShapes(layer)) {
        std::uint64_t elements = 1;
        for (auto d : shape) elements *= static_cast<std::uint64_t>(d);
        n += elements;
    }
    return n;
}

std::vector<std::pair<std::string, std::vector<std::int64_t>>> ModelConfig::parameterShapes(std::uint32_t layer) const {
    const std::int64_t C = dModel, V = vocabSize, T = seqLen, H = mlpWidth();
    if (llama()) {
        const std::int64_t q = std::int64_t{heads} * headDim(), kv = std::int64_t{keyValueHeads()} * headDim();
        if (layer == 0) return {{"token_embedding", {V, C}}};
        if (layer == numLayers() - 1) return {{"norm_weight", {C}}, {"head_weight", {V, C}}};
        std::vector<std::pair<std::string, std::vector<std::int64_t>>> shapes = {
            {"attn_norm_weight", {C}}, {"q_weight", {q, C}}, {"k_weight", {kv, C}}, {"v_weight", {kv, C}}};
        if (qkvBias) shapes.insert(shapes.end(), {{"q_bias", {q}}, {"k_bias", {kv}}, {"v_bias", {kv}}});
        if (qkNorm)  // per head, or over the whole projection (OLMoE)
            shapes.insert(shapes.end(), {{"q_norm_weight", {qkNormProjection ? q : headDim()}},
                                         {"k_norm_weight", {qkNormProjection ? kv : headDim()}}});
        shapes.insert(shapes.end(), {{"o_weight", {C, q}}, {"mlp_norm_weight", {C}}});
        if (!experts.any()) {
            shapes.insert(shapes.end(), {{"gate_weight", {H, C}}, {"up_weight", {H, C}}, {"down_weight", {C, H}}});
            return shapes;
        }
        const std::int64_t E = experts.count, He = experts.width, S = experts.sharedWidth;
        shapes.insert(shapes.end(), {{"router_weight", {E, C}}, {"expert_gate_weight", {E, He, C}},
                                     {"expert_up_weight", {E, He, C}}, {"expert_down_weight", {E, C, He}}});
        if (S > 0)
            shapes.insert(shapes.end(), {{"shared_gate_weight", {S, C}}, {"shared_up_weight", {S, C}},
                                         {"shared_down_weight", {C, S}}});
        return shapes;
    }
    if (layer == 0) return {{"token_embedding", {V, C}}, {"position_embedding", {T, C}}};
    if (layer == numLayers() - 1) return {{"ln_weight", {C}}, {"ln_bias", {C}}, {"head_weight", {V, C}}};
    return {{"ln1_weight", {C}},  {"ln1_bias", {C}},      {"qkv_weight", {3 * C, C}}, {"qkv_bias", {3 * C}},
            {"proj_weight", {C, C}}, {"proj_bias", {C}},  {"ln2_weight", {C}},        {"ln2_bias", {C}},
            {"fc_weight", {H, C}},  {"fc_bias", {H}},      {"out_weight", {C, H}},     {"out_bias", {C}}};
}

std::uint64_t ModelConfig::parameters() const {
    std::uint64_t n = 0;
    for (std::uint32_t i = 0; i < numLayers(); ++i) n += parametersOf(i);
    return tieEmbeddings ? n - std::uint64_t{vocabSize} * dModel : n;
}

std::uint64_t ModelConfig::activeParameters() const {
    if (!experts.any()) return parameters();
    // Each block's experts, of which a token passes through perToken.
    const std::uint64_t perExpert = 3ull * experts.width * dModel;
    return parameters() - std::uint64_t{blocks} * (experts.count - experts.perToken) * perExpert;
}

std::string ModelConfig::shapeText() const {
    const std::string common = fmt::format("{}, {} blocks, d_model {}, {} heads", familyName(family), blocks, dModel, heads);
    const char* tied = tieEmbeddings ? ", tied embeddings" : "";
    if (!llama()) return fmt::format("{}, MLP {}{}", common, mlpWidth(), tied);
    const std::string scaled = rope.kind == RopeScaling::Kind::None ? "" : " (" + ropeScalingText(rope) + ")";
    std::string attention;
    if (headDimension != 0 && headDimension != dModel / heads) attention += fmt::format(", head_dim {}", headDimension);
    if (qkvBias) attention += ", q/k/v biases";
    if (qkNorm) attention += qkNormProjection ? ", q/k norms over the projection" : ", q/k norms";
    if (slidingWindow != 0) attention += fmt::format(", sliding window {}", slidingWindow);
    const std::string mlp =
        !experts.any() ? fmt::format("SwiGLU {}", mlpWidth())
                       : fmt::format("{} experts of SwiGLU {}, top {} (softmax {}){}", experts.count, experts.width,
                                     experts.perToken, experts.softmax == Experts::Softmax::BeforeTopK ? "before" : "after",
                                     experts.sharedWidth > 0 ? fmt::format(" + shared SwiGLU {}", experts.sharedWidth) : "");
    return fmt::format("{} ({} key/value{}), {}, rope_theta {:g}{}{}", common, keyValueHeads(), attention, mlp,
                       ropeTheta, scaled, tied);
}

double ModelConfig::attentionFlopsPerToken(std::uint32_t layer) const {
    if (layer == 0 || layer + 1 >= numLayers()) return 0.0;
    // Scores and weighted sum (causal: half of T on average, counted whole as is customary, as PaLM's MFU).
    return 2.0 * 2.0 * double(seqLen) * (llama() ? double(queryWidth()) : double(dModel));
}

double ModelConfig::forwardFlopsPerToken(std::uint32_t layer) const {
    const double C = dModel, V = vocabSize, H = mlpWidth();
    if (layer == 0) return 0.0;
    if (layer == numLayers() - 1) return 2.0 * C * V;
    const double attention = attentionFlopsPerToken(layer);
    if (llama()) {
        const double kv = double(keyValueHeads()) * headDim(), Q = queryWidth();
        // gate, up and down: of the dense MLP, or of the router, the experts a token is routed to and the shared one.
        const double mlp = !experts.any() ? 3 * C * H
                                          : C * experts.count + 3 * C * (double(experts.perToken) * experts.width +
                                                                         experts.sharedWidth);
        return 2.0 * (C * Q + 2 * C * kv + Q * C + mlp) + attention;  // q, k and v, o, the MLP
    }
    return 2.0 * (3 * C * C + C * C + 2 * C * H) + attention;  // QKV, proj, MLP
}

namespace {

RopeScaling ropeScalingFromDeck(const config::Deck& deck) {
    RopeScaling r;
    const std::string kind = deck.text("model.rope_scaling");
    r.kind = kind == "linear"   ? RopeScaling::Kind::Linear
             : kind == "llama3" ? RopeScaling::Kind::Llama3
             : kind == "yarn"   ? RopeScaling::Kind::Yarn
                                : RopeScaling::Kind::None;
    if (r.kind == RopeScaling::Kind::None) return r;
    r.factor = deck.real("model.rope_factor");
    r.lowFreqFactor = deck.real("model.rope_low_freq_factor");
    r.highFreqFactor = deck.real("model.rope_high_freq_factor");
    r.originalContext = static_cast<std::uint32_t>(deck.integer("model.rope_original_context"));
    r.betaFast = deck.real("model.rope_beta_fast");
    r.betaSlow = deck.real("model.rope_beta_slow");
    r.attentionFactor = deck.real("model.rope_attention_factor");
    const bool needsContext = r.kind == RopeScaling::Kind::Llama3 || r.kind == RopeScaling::Kind::Yarn;
    if (needsContext && r.originalContext == 0)
        throw InputError(fmt::format("{}: model.rope_scaling = {} needs model.rope_original_context (the context the "
                                     "model was first trained on: original_max_position_embeddings, 8192 for Llama 3.1)",
                                     deck.setting("model.rope_scaling").origin, kind));
    if (r.kind == RopeScaling::Kind::Llama3 && !(r.highFreqFactor > r.lowFreqFactor))
        throw InputError(fmt::format("{}: model.rope_high_freq_factor = {:g} must exceed model.rope_low_freq_factor = {:g}",
                                     deck.setting("model.rope_high_freq_factor").origin, r.highFreqFactor, r.lowFreqFactor));
    return r;
}

Experts expertsFromDeck(const config::Deck& deck) {
    Experts e;
    e.count = static_cast<std::uint32_t>(deck.integer("model.experts"));
    e.perToken = static_cast<std::uint32_t>(deck.integer("model.experts_per_token"));
    e.width = static_cast<std::uint32_t>(deck.integer("model.expert_hidden"));
    e.sharedWidth = static_cast<std::uint32_t>(deck.integer("model.shared_expert_hidden"));
    e.softmax = deck.text("model.router_softmax") == "before_topk" ? Experts::Softmax::BeforeTopK : Experts::Softmax::AfterTopK;
    e.auxLossCoef = deck.real("model.router_aux_loss");
    e.zLossCoef = deck.real("model.router_z_loss");
    const auto origin = [&](const char* key) { return deck.setting(key).origin; };
    if (e.count == 0) {
        // The keys of a mixture set without one: a deck that meant experts and forgot how many.
        for (const char* key : {"model.experts_per_token", "model.expert_hidden", "model.shared_expert_hidden"})
            if (deck.integer(key) != 0)
                throw InputError(fmt::format("{}: {} is set, but model.experts = 0 (a dense MLP); set model.experts to "
                                             "train a mixture of experts",
                                             origin(key), key));
        return e;
    }
    if (e.perToken == 0 || e.perToken > e.count)
        throw InputError(fmt::format("{}: model.experts_per_token = {}: each token goes to between 1 and model.experts = "
                                     "{} experts",
                                     origin("model.experts_per_token"), e.perToken, e.count));
    if (e.width == 0)
        throw InputError(fmt::format("{}: model.experts = {} needs model.expert_hidden, each expert's SwiGLU width "
                                     "(moe_intermediate_size; Mixtral 8x7B: 14336)",
                                     origin("model.experts"), e.count));
    return e;
}

}  // namespace

ModelConfig modelConfigFromDeck(const config::Deck& deck, std::uint32_t tokenizerVocab) {
    ModelConfig m;
    const auto deckVocab = static_cast<std::uint32_t>(deck.integer("model.vocab"));
    // Larger than the tokenizer's is padding (GPT-2's 50257 ids trained as
    // 50304, a multiple of 64, for faster matrix products): the extra rows are
    // never looked up and never the target. Smaller would drop ids.
    if (deckVocab != 0 && tokenizerVocab != 0 && deckVocab < tokenizerVocab)
        throw InputError(fmt::format("{}: model.vocab = {}, but the data's tokenizer has {} ids; set model.vocab = 0 (the "
                                     "tokenizer's) or at least {} (padded)",
                                     deck.setting("model.vocab").origin, deckVocab, tokenizerVocab, tokenizerVocab));
    if (deckVocab == 0 && tokenizerVocab == 0)
        throw InputError("the vocabulary size is unknown: set model.vocab, or name data whose tokenizer gives it");
    m.vocabSize = deckVocab != 0 ? deckVocab : tokenizerVocab;
    m.family = deck.text("model.family") == "llama" ? Family::Llama : Family::Gpt2;
    m.blocks = static_cast<std::uint32_t>(deck.integer("model.blocks"));
    m.dModel = static_cast<std::uint32_t>(deck.integer("model.d_model"));
    m.heads = static_cast<std::uint32_t>(deck.integer("model.heads"));
    m.mlpRatio = static_cast<std::uint32_t>(deck.integer("model.mlp_ratio"));
    m.seqLen = static_cast<std::uint32_t>(deck.integer("data.seq_len"));
    m.seed = static_cast<std::uint64_t>(deck.integer("run.seed"));
    m.recompute = recomputeFromName(deck.text("train.recompute"));
    m.tieEmbeddings = deck.flag("model.tie_embeddings");
    m.hfArchitecture = deck.text("model.hf_architecture");
    if (!m.hfArchitecture.empty() && familyOfArchitecture(m.hfArchitecture) == nullptr)
        throw InputError(fmt::format("{}: model.hf_architecture = '{}' is not a transformers class kiln writes (one of {}, "
                                     "or empty: the class the model implies)",
                                     deck.setting("model.hf_architecture").origin, m.hfArchitecture,
                                     knownArchitectures()));
    if (m.llama()) m.headDimension = static_cast<std::uint32_t>(deck.integer("model.head_dim"));
    if (m.dModel % m.heads != 0 && m.headDimension == 0)
        throw InputError(fmt::format("{}: model.d_model = {} is not divisible by model.heads = {}; choose a number of "
                                     "heads that divides the width{}",
                                     deck.setting("model.heads").origin, m.dModel, m.heads,
                                     m.llama() ? ", or set model.head_dim" : ""));
    if (!m.llama()) {
        const auto refuse = [&](const char* key) {
            return InputError(fmt::format("{}: {} is a llama-family setting; model.family = gpt2 has no use for it",
                                          deck.setting(key).origin, key));
        };
        if (deck.integer("model.head_dim") != 0) throw refuse("model.head_dim");
        if (deck.flag("model.qkv_bias")) throw refuse("model.qkv_bias");
        if (deck.flag("model.qk_norm")) throw refuse("model.qk_norm");
        if (deck.integer("model.sliding_window") != 0) throw refuse("model.sliding_window");
        if (deck.integer("model.experts") != 0) throw refuse("model.experts");
        if (const auto declared = deck.integer("model.max_positions"); declared != 0 && declared != m.seqLen)
            throw InputError(fmt::format("{}: model.max_positions = {}, but GPT-2's positions are learned, one row per "
                                         "position of data.seq_len = {}: its context is data.seq_len (leave it 0)",
                                         deck.setting("model.max_positions").origin, declared, m.seqLen));
        return m;
    }
    m.experts = expertsFromDeck(deck);
    m.qkvBias = deck.flag("model.qkv_bias");
    m.qkNorm = deck.flag("model.qk_norm");
    m.qkNormProjection = deck.text("model.qk_norm_over") == "projection";
    if (m.qkNormProjection && !m.qkNorm)
        throw InputError(fmt::format("{}: model.qk_norm_over = projection, but model.qk_norm = false: there are no q/k "
                                     "norms to span the projection",
                                     deck.setting("model.qk_norm_over").origin));
    m.slidingWindow = static_cast<std::uint32_t>(deck.integer("model.sliding_window"));
    // Below data.seq_len it is a context extension: the model then declares data.seq_len (contextLength()).
    m.maxPositions = static_cast<std::uint32_t>(deck.integer("model.max_positions"));
    m.kvHeads = static_cast<std::uint32_t>(deck.integer("model.kv_heads"));
    if (m.kvHeads == 0) m.kvHeads = m.heads;
    if (m.heads % m.kvHeads != 0)
        throw InputError(fmt::format("{}: model.kv_heads = {} does not divide model.heads = {}: each key/value head "
                                     "serves an equal group of query heads (1 = multi-query attention)",
                                     deck.setting("model.kv_heads").origin, m.kvHeads, m.heads));
    if (m.headDim() % 2 != 0)
        throw InputError(fmt::format("{}: a head's width ({}) = {} is odd; rotary embeddings rotate pairs of a head's "
                                     "dimensions",
                                     deck.setting(m.headDimension != 0 ? "model.head_dim" : "model.heads").origin,
                                     m.headDimension != 0 ? "model.head_dim" : "model.d_model / model.heads", m.headDim()));
    m.ffnHidden = static_cast<std::uint32_t>(deck.integer("model.ffn_hidden"));
    if (m.ffnHidden == 0) m.ffnHidden = llamaFfnHidden(m.dModel);
    m.normEps = deck.real("model.norm_eps");
    m.ropeTheta = deck.real("model.rope_theta");
    m.rope = ropeScalingFromDeck(deck);
    return m;
}

}  // namespace kiln::arch
