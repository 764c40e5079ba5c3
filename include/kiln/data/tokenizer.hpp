// Tokenizers: raw bytes, a Hugging Face tokenizer.json, or a SentencePiece model. A tokenizer's identity is
// derived from its content (not its path), so a shard can tell whether it was
// prepared with the tokenizer a run names.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::data {

struct TokenizerInfo {
    // "bytes-v1", or "spm-<crc32>" of what decides a SentencePiece model's ids
    // (its pieces, scores, normaliser and encoding settings; not its file).
    std::string id;
    std::uint32_t vocabSize = 0;
    std::uint32_t eosId = 0;
    // The identity older kiln gave the same model ("sentencepiece-<crc32 of the
    // file>"): sources and cursors that carry it are accepted.
    std::string legacyId{};  // empty: none
    bool is(const std::string& other) const { return other == id || (!legacyId.empty() && other == legacyId); }
};

class Tokenizer {
public:
    virtual ~Tokenizer() = default;
    virtual const TokenizerInfo& info() const = 0;
    // Appends the tokens of `text` (no EOS) to `out`.
    virtual void encode(std::string_view text, std::vector<std::uint32_t>& out) const = 0;
    virtual std::string decode(const std::vector<std::uint32_t>& tokens) const = 0;
    // Whether encode() accepts text that is not valid UTF-8 without loss.
    virtual bool acceptsAnyBytes() const = 0;
};

// "bytes" for the byte tokenizer, a Hugging Face tokenizer.json (byte-level
// BPE; any path ending in .json), else the path of a SentencePiece .model file.
std::unique_ptr<Tokenizer> openTokenizer(const std::string& spec);

// Trains a SentencePiece (unigram) model of `vocabSize` pieces on the text
// file `sampleFile` (one sentence per line); writes `<prefix>.model` and
// `<prefix>.vocab` and returns the .model path.
std::string trainSentencePiece(const std::string& sampleFile, std::uint32_t vocabSize, const std::string& prefix);

// True when `text` is valid UTF-8.
bool isValidUtf8(std::string_view text);

}  // namespace kiln::data
