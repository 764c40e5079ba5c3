// The Hugging Face transformers classes kiln reads (kiln import, model.init_from) and writes (kiln export),
// one description each, the way a registry of training specs names each model once: adding a class is one
// entry of hf_families.cpp. Import finds a config.json's entry by its model_type, export by the class the
// model implies (huggingFaceArchitecture); both read the class's own field names and fixed fields from it.
#pragma once

#include "kiln/arch/model_config.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace kiln::arch {

// How a class's config.json states a sliding window.
enum class WindowField {
    None,           // it has none
    SlidingWindow,  // sliding_window on every layer (null: none): Mistral's, Mixtral's
    QwenLayers,     // use_sliding_window over the layers from max_window_layers on (or layer_types)
};

// How a class names its experts' tensors.
enum class ExpertNames {
    None,
    BlockSparseMoe,  // block_sparse_moe.gate, block_sparse_moe.experts.N.w1 / w3 / w2 (Mixtral)
    MlpExperts,      // mlp.gate, mlp.experts.N.gate_proj / up_proj / down_proj (Qwen 3 MoE, OLMoE)
};

// A config.json field that kiln computes at one value only: import refuses another, export writes this one.
struct FixedField {
    const char* key;
    const char* json;  // the value, as JSON text
    const char* why;   // what kiln does instead, for the refusal
};

struct HuggingFaceFamily {
    const char* modelType;     // config.json's model_type
    const char* architecture;  // the class (config.json's architectures)
    Family family;             // the maths kiln computes it with
    // What the class's attention and MLP have: a kiln model of this class has exactly these.
    bool qkvBias = false;           // Qwen 2's biases on q, k and v
    bool qkNorm = false;            // q/k RMSNorms: per head (Qwen 3) ...
    bool qkNormProjection = false;  // ... or over the whole projection (OLMoE)
    bool experts = false;
    WindowField window = WindowField::None;
    // With experts: where the class keeps their count and width, whether it always renormalises the chosen
    // experts' weights (else norm_topk_prob says), and its tensor names.
    const char* expertCountKey = nullptr;  // the other of num_local_experts / num_experts is read if this is absent
    const char* expertWidthKey = nullptr;  // intermediate_size or moe_intermediate_size
    bool renormalisesChosen = false;
    ExpertNames expertNames = ExpertNames::None;
    std::vector<FixedField> fixed;
};

// Every class, in the order a model's shape picks among those that express it (LlamaForCausalLM before
// MistralForCausalLM: a Llama without a window is written as a Llama unless model.hf_architecture says Mistral).
const std::vector<HuggingFaceFamily>& huggingFaceFamilies();
// The entry of a model_type or a class; null when kiln has none.
const HuggingFaceFamily* familyOfModelType(std::string_view modelType);
const HuggingFaceFamily* familyOfArchitecture(std::string_view architecture);
// Whether the class computes `model` as kiln does (its attention, experts and window).
bool expresses(const HuggingFaceFamily& family, const ModelConfig& model);
// "'llama', 'mistral', ... and 'gpt2'" / the classes likewise: for messages and the reference.
std::string knownModelTypes();
std::string knownArchitectures();

}  // namespace kiln::arch
