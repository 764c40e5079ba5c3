// The shape of the GPT, from the deck (no torch here: the planner and the
// deck checks use it too).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kiln::config {
class Deck;
}

namespace kiln::model {

struct ModelConfig {
    std::uint32_t vocabSize = 0;  // from the tokenizer of the data
    std::uint32_t blocks = 2;     // transformer blocks
    std::uint32_t dModel = 64;
    std::uint32_t heads = 4;
    std::uint32_t mlpRatio = 4;
    std::uint32_t seqLen = 64;
    std::uint64_t seed = 1234;

    // Layers of the ordered list: embedding, the blocks, the output (final norm + head).
    std::uint32_t numLayers() const { return blocks + 2; }
    // Parameters of layer i (for planning and reports).
    std::uint64_t parametersOf(std::uint32_t layer) const;
    std::uint64_t parameters() const;
    // Layer i's parameters as the layer names them, with their shapes, in the
    // layer's order (what a checkpoint holds), without building the layer.
    std::vector<std::pair<std::string, std::vector<std::int64_t>>> parameterShapes(std::uint32_t layer) const;
    // Forward FLOPs of one token through layer i (matmuls, 2 per multiply-add; attention included).
    double forwardFlopsPerToken(std::uint32_t layer) const;
};

// `tokenizerVocab` is the data's vocabulary (0 when unknown). model.vocab, when
// set, must agree with it; at least one of the two must be known.
ModelConfig modelConfigFromDeck(const config::Deck& deck, std::uint32_t tokenizerVocab);

}  // namespace kiln::model
