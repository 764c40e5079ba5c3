// Hugging Face tokenizer.json files of byte-level BPE (GPT-2, Llama 3,
// SmolLM, OLMo, ...), encoding as the `tokenizers` library does with
// add_special_tokens = False (internal to the data module; openTokenizer
// opens one for a path ending in .json).
#pragma once

#include "kiln/data/tokenizer.hpp"

#include <memory>
#include <string>

namespace kiln::data::detail {

// Throws InputError naming the file and the field for what kiln cannot
// encode alike (another model than BPE, a normalizer, byte fallback, ...).
std::unique_ptr<Tokenizer> openHuggingFaceTokenizer(const std::string& path);

}  // namespace kiln::data::detail
