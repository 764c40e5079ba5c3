// A checkpoint's weights as Hugging Face transformers loads them: a gpt2
// model (learned positions, pre-norm blocks with biases, GELU-tanh MLP, final
// LayerNorm, untied head) as GPT2LMHeadModel, a llama model as LlamaForCausalLM
// (or Qwen2ForCausalLM, Qwen3ForCausalLM, MistralForCausalLM, and with experts
// MixtralForCausalLM, Qwen3MoeForCausalLM, OlmoeForCausalLM: huggingFaceArchitecture),
// each expert's weights a tensor of its own as save_pretrained writes them:
//
//   DIR/model.safetensors   the weights under the architecture's names (GPT-2's attention
//                           and MLP matrices transposed: it keeps them as Conv1D, in x out);
//                           a model larger than ExportOptions::maxShardBytes in files
//                           model-00001-of-0000N.safetensors cut at layer boundaries, with
//                           model.safetensors.index.json (weight_map), as save_pretrained does
//   DIR/config.json         a GPT2Config (tie_word_embeddings false, gelu_new, no dropout)
//                           or a LlamaConfig (num_key_value_heads, rope_theta, rms_norm_eps,
//                           intermediate_size, untied)
//   DIR/kiln_reference.json two token sequences and the logits kiln's own
//                           forward gives for them, to check a load against (models up to
//                           ExportOptions::maxReferenceBytes: the forward holds the model)
//
// One layer's weights at a time are in memory, whatever the model's size.
//
// The tokenizer is not exported: kiln's byte tokenizer and SentencePiece
// models have no GPT-2 tokenizer equivalent; feed the ids kiln trained on.
// config.json's eos_token_id is the id that ends kiln's documents (the
// run's tokenizer's EOS); bos_token_id is null: kiln adds none.
#pragma once

#include "kiln/arch/model_config.hpp"

#include <filesystem>
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::train {

struct ExportOptions {
    std::uint64_t maxShardBytes = 4000ull << 20;      // per safetensors file (a layer larger stays whole)
    std::uint64_t maxReferenceBytes = 4000ull << 20;  // kiln_reference.json for models up to this size
};

struct ExportReport {
    std::uint64_t tensors = 0, bytes = 0;
    double parameters = 0.0;
    std::string architecture;         // huggingFaceArchitecture's
    std::vector<std::string> files;   // written into DIR
    std::vector<std::string> notes;   // what the export could not write, if anything
};

// The transformers class a model is exported as: model.hf_architecture when set (kiln import sets it), else
// GPT2LMHeadModel; Qwen2ForCausalLM with q/k/v biases, Qwen3ForCausalLM with q/k norms, MistralForCausalLM
// with a sliding window, else LlamaForCausalLM; with experts OlmoeForCausalLM (q/k norms over the projection),
// Qwen3MoeForCausalLM (per head) or MixtralForCausalLM (none). InputError for a model no class expresses (both
// biases and norms, a shared expert), or a key that names another model (hf_names.cpp).
std::string huggingFaceArchitecture(const arch::ModelConfig& model);

ExportReport exportToHuggingFace(const std::filesystem::path& checkpoint, const std::filesystem::path& dir,
                                 const ExportOptions& options = {});

}  // namespace kiln::train
