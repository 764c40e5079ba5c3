#include "hf_names.hpp"

#include "kiln/arch/hf_families.hpp"
#include "kiln/base/error.hpp"
#include "kiln/train/hf_export.hpp"

#include <fmt/format.h>

namespace kiln::train {

std::string HuggingFaceName::expertName(std::uint32_t e) const {
    const auto at = name.find("{}");
    return name.substr(0, at) + std::to_string(e) + name.substr(at + 2);
}

std::string huggingFaceArchitecture(const arch::ModelConfig& c) {
    using Softmax = arch::Experts::Softmax;
    // What no class expresses, said by what is missing; then the first class that computes the model as kiln does.
    if (!c.llama()) {
    } else if (c.experts.any()) {
        if (c.experts.sharedWidth > 0)
            throw InputError("the model has a shared expert (model.shared_expert_hidden): no transformers class kiln "
                             "writes has one without Qwen 2 MoE's gate on it");
        if (c.qkvBias) throw InputError("the model has experts and q/k/v biases: no transformers class has both");
        if (c.slidingWindow != 0 && c.qkNorm)
            throw InputError("the model has experts, q/k norms and a sliding window: no transformers class has all three");
        // OLMoE norms q and k over the projection, Qwen 3 MoE per head; Mixtral has neither and renormalises the
        // chosen experts' weights (softmax after top-k); the other two say which by norm_topk_prob.
        if (c.qkNormProjection && (c.slidingWindow != 0 || c.headDim() * c.heads != c.dModel))
            throw InputError("OLMoE's q/k norms with a sliding window or a head_dim apart from d_model / heads: "
                             "OlmoeForCausalLM has neither");
        if (!c.qkNorm && c.experts.softmax == Softmax::BeforeTopK)
            throw InputError("model.router_softmax = before_topk without q/k norms: Mixtral renormalises the chosen "
                             "experts' weights (after_topk), and the classes that do not (OLMoE, Qwen 3 MoE) norm q and k");
    } else {
        if (c.qkvBias && c.qkNorm)
            throw InputError("the model has both q/k/v biases and q/k norms: no transformers class has exactly that "
                             "(Qwen 3's attention_bias adds o's bias as well)");
        if (c.qkNormProjection)
            throw InputError("model.qk_norm_over = projection without experts: OLMoE's norms come with its experts in "
                             "transformers (OlmoeForCausalLM); no dense class has them");
    }
    const arch::HuggingFaceFamily* implied = nullptr;
    for (const auto& family : arch::huggingFaceFamilies())
        if (!implied && arch::expresses(family, c)) implied = &family;
    if (implied == nullptr)
        throw InputError(fmt::format("no transformers class kiln writes ({}) computes this model: {}",
                                     arch::knownArchitectures(), c.shapeText()));
    if (c.hfArchitecture.empty() || c.hfArchitecture == implied->architecture) return implied->architecture;
    // Another name for the same maths: a Llama without a window is a Mistral too.
    if (const auto* named = arch::familyOfArchitecture(c.hfArchitecture); named && arch::expresses(*named, c))
        return named->architecture;
    throw InputError(fmt::format("model.hf_architecture = {}, but the model is a {} (its biases, norms, experts and "
                                 "window decide); leave the key empty",
                                 c.hfArchitecture, implied->architecture));
}

std::vector<HuggingFaceName> huggingFaceNames(const arch::ModelConfig& c, std::uint32_t layer) {
    const bool output = layer == c.numLayers() - 1;
    if (c.llama()) {
        if (layer == 0) return {{"model.embed_tokens.weight"}};
        if (output) return {{"model.norm.weight"}, {"lm_head.weight"}};
        const std::string p = fmt::format("model.layers.{}.", layer - 1);
        std::vector<HuggingFaceName> names = {{p + "input_layernorm.weight"}, {p + "self_attn.q_proj.weight"},
                                              {p + "self_attn.k_proj.weight"}, {p + "self_attn.v_proj.weight"}};
        if (c.qkvBias)
            names.insert(names.end(), {{p + "self_attn.q_proj.bias"}, {p + "self_attn.k_proj.bias"}, {p + "self_attn.v_proj.bias"}});
        if (c.qkNorm) names.insert(names.end(), {{p + "self_attn.q_norm.weight"}, {p + "self_attn.k_norm.weight"}});
        names.insert(names.end(), {{p + "self_attn.o_proj.weight"}, {p + "post_attention_layernorm.weight"}});
        if (!c.experts.any()) {
            names.insert(names.end(), {{p + "mlp.gate_proj.weight"}, {p + "mlp.up_proj.weight"}, {p + "mlp.down_proj.weight"}});
            return names;
        }
        const std::uint32_t E = c.experts.count;
        if (arch::familyOfArchitecture(huggingFaceArchitecture(c))->expertNames == arch::ExpertNames::BlockSparseMoe) {
            const std::string moe = p + "block_sparse_moe.";
            names.insert(names.end(), {{moe + "gate.weight"}, {moe + "experts.{}.w1.weight", false, E},
                                       {moe + "experts.{}.w3.weight", false, E}, {moe + "experts.{}.w2.weight", false, E}});
        } else {
            names.insert(names.end(), {{p + "mlp.gate.weight"}, {p + "mlp.experts.{}.gate_proj.weight", false, E},
                                       {p + "mlp.experts.{}.up_proj.weight", false, E},
                                       {p + "mlp.experts.{}.down_proj.weight", false, E}});
        }
        // Qwen 2 MoE's names for a shared expert (no class transformers has for kiln's: export refuses it).
        if (c.experts.sharedWidth > 0)
            names.insert(names.end(), {{p + "mlp.shared_expert.gate_proj.weight"}, {p + "mlp.shared_expert.up_proj.weight"},
                                       {p + "mlp.shared_expert.down_proj.weight"}});
        return names;
    }
    if (layer == 0) return {{"transformer.wte.weight"}, {"transformer.wpe.weight"}};
    if (output) return {{"transformer.ln_f.weight"}, {"transformer.ln_f.bias"}, {"lm_head.weight"}};
    const std::string p = fmt::format("transformer.h.{}.", layer - 1);
    return {{p + "ln_1.weight"},         {p + "ln_1.bias"},        {p + "attn.c_attn.weight", true},
            {p + "attn.c_attn.bias"},    {p + "attn.c_proj.weight", true}, {p + "attn.c_proj.bias"},
            {p + "ln_2.weight"},         {p + "ln_2.bias"},        {p + "mlp.c_fc.weight", true},
            {p + "mlp.c_fc.bias"},       {p + "mlp.c_proj.weight", true},  {p + "mlp.c_proj.bias"}};
}

}  // namespace kiln::train
