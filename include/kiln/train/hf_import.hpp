// A Hugging Face checkpoint as the start of a kiln run (model.init_from = DIR):
// config.json read into kiln's model shape (LlamaForCausalLM or
// GPT2LMHeadModel; anything kiln cannot express refused by its field), and
// the weights of model.safetensors (or the shards model.safetensors.index.json
// lists) copied into the layers each rank holds, each rank reading only its
// own tensors. Weights only: the optimiser starts fresh and the step at 0.
#pragma once

#include "kiln/model/gpt.hpp"

#include <filesystem>
#include <string>

namespace kiln::train {

// The model a Hugging Face directory holds (vocabSize from its config; seqLen
// and seed left at their defaults). Throws InputError naming the directory's
// config.json and the field when kiln cannot express it.
arch::ModelConfig readHuggingFaceConfig(const std::filesystem::path& dir);

// The deck lines ([model] section) that describe that model, with a comment per key.
std::string deckLinesFor(const arch::ModelConfig& config);

// Why `run` cannot start from the model of `dir` (each differing deck key with
// the config field it comes from), or "" when it can.
std::string initFromProblem(const arch::ModelConfig& hf, const arch::ModelConfig& run, const std::filesystem::path& dir);

// Copies the weights of `dir` into the layers `model` holds (this rank's
// shards of a split stage). Throws InputError naming a missing tensor or one
// of another shape.
void initFromHuggingFace(const std::filesystem::path& dir, model::Gpt& model);

}  // namespace kiln::train
