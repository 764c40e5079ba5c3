#include "kiln/arch/hf_families.hpp"

#include <fmt/format.h>

namespace kiln::arch {

const std::vector<HuggingFaceFamily>& huggingFaceFamilies() {
    static const std::vector<HuggingFaceFamily> families = [] {
        std::vector<HuggingFaceFamily> all;
        const auto entry = [&](const char* type, const char* architecture, Family family) -> HuggingFaceFamily& {
            HuggingFaceFamily f{};
            f.modelType = type;
            f.architecture = architecture;
            f.family = family;
            all.push_back(std::move(f));
            return all.back();
        };
        const auto llama = [&](const char* type, const char* architecture) -> HuggingFaceFamily& {
            return entry(type, architecture, Family::Llama);
        };
        llama("llama", "LlamaForCausalLM");
        // Mistral v0.3 and later are the Llama architecture under another name, with an optional window.
        llama("mistral", "MistralForCausalLM").window = WindowField::SlidingWindow;
        auto& qwen2 = llama("qwen2", "Qwen2ForCausalLM");
        qwen2.qkvBias = true;
        qwen2.window = WindowField::QwenLayers;
        auto& qwen3 = llama("qwen3", "Qwen3ForCausalLM");
        qwen3.qkNorm = true;
        qwen3.window = WindowField::QwenLayers;

        auto& mixtral = llama("mixtral", "MixtralForCausalLM");
        mixtral.experts = true;
        mixtral.window = WindowField::SlidingWindow;
        mixtral.expertCountKey = "num_local_experts";
        mixtral.expertWidthKey = "intermediate_size";
        mixtral.renormalisesChosen = true;
        mixtral.expertNames = ExpertNames::BlockSparseMoe;
        mixtral.fixed = {{"router_jitter_noise", "0.0", "kiln's router adds no noise"}};
        auto& qwen3Moe = llama("qwen3_moe", "Qwen3MoeForCausalLM");
        qwen3Moe.qkNorm = true;
        qwen3Moe.experts = true;
        qwen3Moe.window = WindowField::QwenLayers;
        qwen3Moe.expertCountKey = "num_experts";
        qwen3Moe.expertWidthKey = "moe_intermediate_size";
        qwen3Moe.expertNames = ExpertNames::MlpExperts;
        qwen3Moe.fixed = {{"decoder_sparse_step", "1", "kiln's experts are in every block"},
                          {"mlp_only_layers", "[]", "kiln's experts are in every block"}};
        auto& olmoe = llama("olmoe", "OlmoeForCausalLM");
        olmoe.qkNorm = olmoe.qkNormProjection = true;
        olmoe.experts = true;
        olmoe.expertCountKey = "num_experts";
        olmoe.expertWidthKey = "intermediate_size";
        olmoe.expertNames = ExpertNames::MlpExperts;
        olmoe.fixed = {{"clip_qkv", "null", "kiln does not clip q, k and v"}};

        entry("gpt2", "GPT2LMHeadModel", Family::Gpt2);
        return all;
    }();
    return families;
}

const HuggingFaceFamily* familyOfModelType(std::string_view modelType) {
    for (const auto& f : huggingFaceFamilies())
        if (modelType == f.modelType) return &f;
    return nullptr;
}

const HuggingFaceFamily* familyOfArchitecture(std::string_view architecture) {
    for (const auto& f : huggingFaceFamilies())
        if (architecture == f.architecture) return &f;
    return nullptr;
}

bool expresses(const HuggingFaceFamily& f, const ModelConfig& m) {
    if (f.family != m.family) return false;
    if (f.family == Family::Gpt2) return true;
    return f.qkvBias == m.qkvBias && f.qkNorm == m.qkNorm && f.qkNormProjection == m.qkNormProjection &&
           f.experts == m.experts.any() && (m.slidingWindow == 0 || f.window != WindowField::None) &&
           (!f.experts || m.experts.softmax == Experts::Softmax::AfterTopK || !f.renormalisesChosen);
}

namespace {
template <typename Name>
std::string listed(Name name) {
    const auto& all = huggingFaceFamilies();
    std::string text;
    for (std::size_t i = 0; i < all.size(); ++i)
        text += fmt::format("{}'{}'", i == 0 ? "" : i + 1 == all.size() ? " and " : ", ", name(all[i]));
    return text;
}
}  // namespace

std::string knownModelTypes() {
    return listed([](const HuggingFaceFamily& f) { return f.modelType; });
}

std::string knownArchitectures() {
    return listed([](const HuggingFaceFamily& f) { return f.architecture; });
}

}  // namespace kiln::arch
