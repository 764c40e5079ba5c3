// kiln's GPT is GPT-2's architecture (learned positions, pre-norm blocks with
// biases, GELU-tanh MLP, final LayerNorm) with an untied head, so a
// checkpoint's weights load into Hugging Face transformers' GPT2LMHeadModel:
//
//   DIR/model.safetensors   the weights under GPT-2's names (attention and MLP
//                           matrices transposed: GPT-2 keeps them as Conv1D, in x out)
//   DIR/config.json         a GPT2Config: tie_word_embeddings false, gelu_new, no dropout
//   DIR/kiln_reference.json two token sequences and the logits kiln's own
//                           forward gives for them, to check a load against
//
// The tokenizer is not exported: kiln's byte tokenizer and SentencePiece
// models have no GPT-2 tokenizer equivalent; feed the ids kiln trained on.
#pragma once

#include <filesystem>
#include <string>

namespace kiln::train {

struct ExportReport {
    std::uint64_t tensors = 0, bytes = 0;
    double parameters = 0.0;
};

ExportReport exportToHuggingFace(const std::filesystem::path& checkpoint, const std::filesystem::path& dir);

}  // namespace kiln::train
