#include "hf_names.hpp"

#include <fmt/format.h>

namespace kiln::train {

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
        names.insert(names.end(), {{p + "self_attn.o_proj.weight"}, {p + "post_attention_layernorm.weight"},
                                   {p + "mlp.gate_proj.weight"}, {p + "mlp.up_proj.weight"}, {p + "mlp.down_proj.weight"}});
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
