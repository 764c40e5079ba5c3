// The normalizer of a Hugging Face tokenizer.json, applied as `tokenizers` applies it to each piece of text
// between added tokens: Unicode normalization (NFC, NFKC, NFD, NFKD, by ICU: the same Unicode data
// `tokenizers` uses), Prepend (SentencePiece's "▁" before a piece: Llama 2, TinyLlama), Replace of a string
// (" " by "▁"), and a Sequence of these. Internal to the data module.
#pragma once

#include "kiln/base/error.hpp"

#include <nlohmann/json_fwd.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace kiln::data::detail {

class HuggingFaceNormalizer {
public:
    // `spec`: the file's "normalizer" (null: none). `refuse` makes the InputError for a step kiln does not apply
    // alike (its argument says which and why).
    HuggingFaceNormalizer(const nlohmann::json& spec, const std::function<InputError(const std::string&)>& refuse);
    ~HuggingFaceNormalizer();
    HuggingFaceNormalizer(HuggingFaceNormalizer&&) noexcept;
    HuggingFaceNormalizer& operator=(HuggingFaceNormalizer&&) noexcept;

    bool none() const { return steps_.empty(); }
    // Whether a step puts text before every piece (Prepend: SentencePiece's "▁").
    bool prepends() const;
    // `text` (UTF-8) normalized in place.
    void apply(std::string& text) const;

private:
    struct Step;
    std::vector<std::unique_ptr<Step>> steps_;
};

}  // namespace kiln::data::detail
