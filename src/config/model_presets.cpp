#include "kiln/config/model_presets.hpp"

namespace kiln::config {

// The shapes as their Hugging Face configs give them. The sequence length
// (data.seq_len) stays the deck's: it is the data's, not the model's.
const std::vector<ModelPreset>& modelPresets() {
    static const std::vector<ModelPreset> presets = {
        {"gpt2-small", "GPT-2 small, 124 M parameters (with its 50257-id vocabulary)",
         {{"model.family", "gpt2"}, {"model.blocks", "12"}, {"model.d_model", "768"}, {"model.heads", "12"},
          {"model.mlp_ratio", "4"}, {"model.vocab", "50257"}, {"model.tie_embeddings", "true"}}},
        {"gpt2-medium", "GPT-2 medium, 355 M parameters",
         {{"model.family", "gpt2"}, {"model.blocks", "24"}, {"model.d_model", "1024"}, {"model.heads", "16"},
          {"model.mlp_ratio", "4"}, {"model.vocab", "50257"}, {"model.tie_embeddings", "true"}}},
        {"smollm-135m", "SmolLM-135M (head tied to the embedding)",
         {{"model.family", "llama"}, {"model.blocks", "30"}, {"model.d_model", "576"}, {"model.heads", "9"},
          {"model.kv_heads", "3"}, {"model.ffn_hidden", "1536"}, {"model.rope_theta", "10000"},
          {"model.norm_eps", "1e-5"}, {"model.vocab", "49152"}, {"model.tie_embeddings", "true"}}},
        {"smollm2-135m", "SmolLM2-135M (head tied to the embedding)",
         {{"model.family", "llama"}, {"model.blocks", "30"}, {"model.d_model", "576"}, {"model.heads", "9"},
          {"model.kv_heads", "3"}, {"model.ffn_hidden", "1536"}, {"model.rope_theta", "100000"},
          {"model.norm_eps", "1e-5"}, {"model.vocab", "49152"}, {"model.tie_embeddings", "true"}}},
        {"smollm2-1.7b", "SmolLM2-1.7B (head tied to the embedding)",
         {{"model.family", "llama"}, {"model.blocks", "24"}, {"model.d_model", "2048"}, {"model.heads", "32"},
          {"model.kv_heads", "32"}, {"model.ffn_hidden", "8192"}, {"model.rope_theta", "130000"},
          {"model.norm_eps", "1e-5"}, {"model.vocab", "49152"}, {"model.tie_embeddings", "true"}}},
        {"llama-3.2-1b", "Llama 3.2 1B (head tied to the embedding, llama3 rotary scaling 32)",
         {{"model.family", "llama"}, {"model.blocks", "16"}, {"model.d_model", "2048"}, {"model.heads", "32"},
          {"model.kv_heads", "8"}, {"model.ffn_hidden", "8192"}, {"model.rope_theta", "500000"},
          {"model.rope_scaling", "llama3"}, {"model.rope_factor", "32"}, {"model.rope_low_freq_factor", "1"},
          {"model.rope_high_freq_factor", "4"}, {"model.rope_original_context", "8192"},
          {"model.norm_eps", "1e-5"}, {"model.vocab", "128256"}, {"model.tie_embeddings", "true"}}},
        {"llama-3.2-3b", "Llama 3.2 3B (head tied to the embedding, llama3 rotary scaling 32)",
         {{"model.family", "llama"}, {"model.blocks", "28"}, {"model.d_model", "3072"}, {"model.heads", "24"},
          {"model.kv_heads", "8"}, {"model.ffn_hidden", "8192"}, {"model.rope_theta", "500000"},
          {"model.rope_scaling", "llama3"}, {"model.rope_factor", "32"}, {"model.rope_low_freq_factor", "1"},
          {"model.rope_high_freq_factor", "4"}, {"model.rope_original_context", "8192"},
          {"model.norm_eps", "1e-5"}, {"model.vocab", "128256"}, {"model.tie_embeddings", "true"}}},
        {"llama-3.1-8b", "Llama 3.1 8B (llama3 rotary scaling 8)",
         {{"model.family", "llama"}, {"model.blocks", "32"}, {"model.d_model", "4096"}, {"model.heads", "32"},
          {"model.kv_heads", "8"}, {"model.ffn_hidden", "14336"}, {"model.rope_theta", "500000"},
          {"model.rope_scaling", "llama3"}, {"model.rope_factor", "8"}, {"model.rope_low_freq_factor", "1"},
          {"model.rope_high_freq_factor", "4"}, {"model.rope_original_context", "8192"},
          {"model.norm_eps", "1e-5"}, {"model.vocab", "128256"}}},
        {"llama-3.1-70b", "Llama 3.1 70B (llama3 rotary scaling 8)",
         {{"model.family", "llama"}, {"model.blocks", "80"}, {"model.d_model", "8192"}, {"model.heads", "64"},
          {"model.kv_heads", "8"}, {"model.ffn_hidden", "28672"}, {"model.rope_theta", "500000"},
          {"model.rope_scaling", "llama3"}, {"model.rope_factor", "8"}, {"model.rope_low_freq_factor", "1"},
          {"model.rope_high_freq_factor", "4"}, {"model.rope_original_context", "8192"},
          {"model.norm_eps", "1e-5"}, {"model.vocab", "128256"}}},
        {"mistral-7b-v0.3", "Mistral 7B v0.3 (the Llama architecture; no sliding window)",
         {{"model.family", "llama"}, {"model.blocks", "32"}, {"model.d_model", "4096"}, {"model.heads", "32"},
          {"model.kv_heads", "8"}, {"model.ffn_hidden", "14336"}, {"model.rope_theta", "1000000"},
          {"model.norm_eps", "1e-5"}, {"model.vocab", "32768"}}},
        {"qwen2.5-0.5b", "Qwen2.5-0.5B (q/k/v biases, head tied to the embedding)",
         {{"model.family", "llama"}, {"model.blocks", "24"}, {"model.d_model", "896"}, {"model.heads", "14"},
          {"model.kv_heads", "2"}, {"model.ffn_hidden", "4864"}, {"model.rope_theta", "1000000"},
          {"model.qkv_bias", "true"}, {"model.norm_eps", "1e-6"}, {"model.vocab", "151936"},
          {"model.tie_embeddings", "true"}}},
        {"qwen2.5-7b", "Qwen2.5-7B (q/k/v biases)",
         {{"model.family", "llama"}, {"model.blocks", "28"}, {"model.d_model", "3584"}, {"model.heads", "28"},
          {"model.kv_heads", "4"}, {"model.ffn_hidden", "18944"}, {"model.rope_theta", "1000000"},
          {"model.qkv_bias", "true"}, {"model.norm_eps", "1e-6"}, {"model.vocab", "152064"}}},
        {"qwen3-0.6b", "Qwen3-0.6B (q/k norms, head_dim 128, head tied to the embedding)",
         {{"model.family", "llama"}, {"model.blocks", "28"}, {"model.d_model", "1024"}, {"model.heads", "16"},
          {"model.kv_heads", "8"}, {"model.head_dim", "128"}, {"model.ffn_hidden", "3072"},
          {"model.rope_theta", "1000000"}, {"model.qk_norm", "true"}, {"model.norm_eps", "1e-6"},
          {"model.vocab", "151936"}, {"model.tie_embeddings", "true"}}},
        {"qwen3-8b", "Qwen3-8B (q/k norms, head_dim 128)",
         {{"model.family", "llama"}, {"model.blocks", "36"}, {"model.d_model", "4096"}, {"model.heads", "32"},
          {"model.kv_heads", "8"}, {"model.head_dim", "128"}, {"model.ffn_hidden", "12288"},
          {"model.rope_theta", "1000000"}, {"model.qk_norm", "true"}, {"model.norm_eps", "1e-6"},
          {"model.vocab", "151936"}}},
        {"llama-3-8b", "Llama 3 8B",
         {{"model.family", "llama"}, {"model.blocks", "32"}, {"model.d_model", "4096"}, {"model.heads", "32"},
          {"model.kv_heads", "8"}, {"model.ffn_hidden", "14336"}, {"model.rope_theta", "500000"},
          {"model.norm_eps", "1e-5"}, {"model.vocab", "128256"}}},
        {"llama-2-70b", "Llama 2 70B",
         {{"model.family", "llama"}, {"model.blocks", "80"}, {"model.d_model", "8192"}, {"model.heads", "64"},
          {"model.kv_heads", "8"}, {"model.ffn_hidden", "28672"}, {"model.rope_theta", "10000"},
          {"model.norm_eps", "1e-5"}, {"model.vocab", "32000"}}},
    };
    return presets;
}

const ModelPreset* findModelPreset(const std::string& name) {
    for (const auto& preset : modelPresets())
        if (preset.name == name) return &preset;
    return nullptr;
}

}  // namespace kiln::config
