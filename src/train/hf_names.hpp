// The names Hugging Face transformers gives kiln's parameters, layer by layer
// in ModelConfig::parameterShapes order: what export writes and import reads.
#pragma once

#include "kiln/arch/model_config.hpp"

#include <string>
#include <vector>

namespace kiln::train {

struct HuggingFaceName {
    std::string name;
    bool transposed = false;  // stored (in, out): GPT-2's Conv1D weights
    // A parameter of all of a block's experts (E, ...), stored one tensor per expert: `name` has "{}" where the
    // expert's index goes.
    std::uint32_t experts = 0;
    std::string expertName(std::uint32_t e) const;
};


std::vector<HuggingFaceName> huggingFaceNames(const arch::ModelConfig& config, std::uint32_t layer);

}  // namespace kiln::train
