#include "kiln/model/model_config.hpp"

#include "kiln/base/error.hpp"
#include "kiln/config/deck.hpp"

#include <fmt/format.h>

namespace kiln::model {

std::uint64_t ModelConfig::parametersOf(std::uint32_t layer) const {
    const std::uint64_t C = dModel, V = vocabSize, T = seqLen, H = static_cast<std::uint64_t>(mlpRatio) * dModel;
    if (layer == 0) return V * C + T * C;                       // token and position embeddings
    if (layer == numLayers() - 1) return 2 * C + C * V;         // final norm, head (no bias)
    return 2 * C + (C * 3 * C + 3 * C) + (C * C + C) + 2 * C + (C * H + H) + (H * C + C);  // LN, QKV, proj, LN, MLP
}

std::vector<std::pair<std::string, std::vector<std::int64_t>>> ModelConfig::parameterShapes(std::uint32_t layer) const {
    const std::int64_t C = dModel, V = vocabSize, T = seqLen, H = std::int64_t{mlpRatio} * dModel;
    if (layer == 0) return {{"token_embedding", {V, C}}, {"position_embedding", {T, C}}};
    if (layer == numLayers() - 1) return {{"ln_weight", {C}}, {"ln_bias", {C}}, {"head_weight", {V, C}}};
    return {{"ln1_weight", {C}},  {"ln1_bias", {C}},      {"qkv_weight", {3 * C, C}}, {"qkv_bias", {3 * C}},
            {"proj_weight", {C, C}}, {"proj_bias", {C}},  {"ln2_weight", {C}},        {"ln2_bias", {C}},
            {"fc_weight", {H, C}},  {"fc_bias", {H}},      {"out_weight", {C, H}},     {"out_bias", {C}}};
}

std::uint64_t ModelConfig::parameters() const {
    std::uint64_t n = 0;
    for (std::uint32_t i = 0; i < numLayers(); ++i) n += parametersOf(i);
    return n;
}

double ModelConfig::forwardFlopsPerToken(std::uint32_t layer) const {
    const double C = dModel, V = vocabSize, T = seqLen, H = double(mlpRatio) * dModel;
    if (layer == 0) return 0.0;
    if (layer == numLayers() - 1) return 2.0 * C * V;
    // QKV, attention scores and weighted sum (causal: half of T on average, counted whole as is customary), proj, MLP.
    return 2.0 * (3 * C * C + C * C + 2 * C * H) + 2.0 * 2.0 * T * C;
}

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
    m.blocks = static_cast<std::uint32_t>(deck.integer("model.blocks"));
    m.dModel = static_cast<std::uint32_t>(deck.integer("model.d_model"));
    m.heads = static_cast<std::uint32_t>(deck.integer("model.heads"));
    m.mlpRatio = static_cast<std::uint32_t>(deck.integer("model.mlp_ratio"));
    m.seqLen = static_cast<std::uint32_t>(deck.integer("data.seq_len"));
    m.seed = static_cast<std::uint64_t>(deck.integer("run.seed"));
    if (m.dModel % m.heads != 0)
        throw InputError(fmt::format("{}: model.d_model = {} is not divisible by model.heads = {}; choose a number of "
                                     "heads that divides the width",
                                     deck.setting("model.heads").origin, m.dModel, m.heads));
    return m;
}

}  // namespace kiln::model
