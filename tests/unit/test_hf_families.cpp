// The Hugging Face classes kiln reads and writes are described once (arch/hf_families.cpp): each is found by
// its model_type and its class name, and a model of each class's shape is exported as that class.
#include "kiln/arch/hf_families.hpp"
#include "kiln/base/error.hpp"
#include "kiln/train/hf_export.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>

using namespace kiln::arch;

namespace {

// A small model with exactly the attention, experts and window the class has.
ModelConfig modelOf(const HuggingFaceFamily& f) {
    ModelConfig m;
    m.family = f.family;
    m.blocks = 2;
    m.dModel = 64;
    m.heads = 4;
    m.vocabSize = 256;
    m.seqLen = 32;
    if (f.family == Family::Gpt2) return m;
    m.qkvBias = f.qkvBias;
    m.qkNorm = f.qkNorm;
    m.qkNormProjection = f.qkNormProjection;
    // A window where a windowless class (Llama) would otherwise come first.
    if (f.window == WindowField::SlidingWindow && !f.experts) m.slidingWindow = 16;
    if (f.experts) {
        m.experts.count = 4;
        m.experts.perToken = 2;
        m.experts.width = 32;
        m.experts.softmax = f.renormalisesChosen ? Experts::Softmax::AfterTopK : Experts::Softmax::BeforeTopK;
    }
    return m;
}

}  // namespace

TEST(HuggingFaceFamilies, EachClassIsNamedOnceAndFoundBothWays) {
    std::set<std::string> types, classes;
    for (const auto& f : huggingFaceFamilies()) {
        EXPECT_TRUE(types.insert(f.modelType).second) << f.modelType << " twice";
        EXPECT_TRUE(classes.insert(f.architecture).second) << f.architecture << " twice";
        EXPECT_EQ(familyOfModelType(f.modelType), &f);
        EXPECT_EQ(familyOfArchitecture(f.architecture), &f);
        if (f.experts) {
            EXPECT_NE(f.expertCountKey, nullptr) << f.modelType;
            EXPECT_NE(f.expertWidthKey, nullptr) << f.modelType;
            EXPECT_NE(f.expertNames, ExpertNames::None) << f.modelType;
        }
    }
    EXPECT_EQ(familyOfModelType("gemma"), nullptr);
    EXPECT_EQ(familyOfArchitecture("GemmaForCausalLM"), nullptr);
    EXPECT_NE(knownModelTypes().find("'qwen3_moe'"), std::string::npos);
}

TEST(HuggingFaceFamilies, AModelOfEachClassIsExportedAsThatClass) {
    for (const auto& f : huggingFaceFamilies()) {
        const auto m = modelOf(f);
        EXPECT_TRUE(expresses(f, m)) << f.architecture;
        EXPECT_EQ(kiln::train::huggingFaceArchitecture(m), f.architecture) << m.shapeText();
    }
}

TEST(HuggingFaceFamilies, TheDecksClassIsKeptOnlyWhereItComputesTheModel) {
    auto plain = modelOf(*familyOfModelType("llama"));
    plain.hfArchitecture = "MistralForCausalLM";  // a Mistral v0.3 imported: a Llama by its maths
    EXPECT_EQ(kiln::train::huggingFaceArchitecture(plain), "MistralForCausalLM");
    plain.hfArchitecture = "Qwen2ForCausalLM";  // Qwen 2 has q/k/v biases this model lacks
    EXPECT_THROW(kiln::train::huggingFaceArchitecture(plain), kiln::InputError);
    auto both = plain;
    both.hfArchitecture.clear();
    both.qkvBias = both.qkNorm = true;  // no class has both
    EXPECT_THROW(kiln::train::huggingFaceArchitecture(both), kiln::InputError);
}
