// MFU's numerator and denominator: the FLOPs per token of GPT-2 small, Llama 3
// 8B and a Mixtral-shaped mixture of experts against a count by hand (6 x the
// matmul weights a token passes through, plus 12 x layers x seq_len x the
// query width for attention, as PaLM counts); what full and selective
// recomputation add; the devices' peaks found by the names drivers report.
#include "kiln/plan/flops.hpp"

#include <gtest/gtest.h>

using namespace kiln;

namespace {

arch::ModelConfig gpt2Small() {
    arch::ModelConfig c;
    c.vocabSize = 50257;
    c.blocks = 12;
    c.dModel = 768;
    c.heads = 12;
    c.seqLen = 1024;
    return c;
}

arch::ModelConfig llama3_8b() {
    arch::ModelConfig c;
    c.family = arch::Family::Llama;
    c.vocabSize = 128256;
    c.blocks = 32;
    c.dModel = 4096;
    c.heads = 32;
    c.kvHeads = 8;
    c.ffnHidden = 14336;
    c.seqLen = 8192;
    return c;
}

plan::PipelinePlacement pipeline(std::vector<std::uint32_t> cuts, std::vector<std::uint32_t> recompute,
                                 std::uint64_t microbatches) {
    plan::PipelinePlacement p;
    p.cuts = std::move(cuts);
    p.recompute = std::move(recompute);
    p.microbatches = microbatches;
    return p;
}

}  // namespace

TEST(Flops, Gpt2SmallByHand) {
    const double C = 768, V = 50257, L = 12, T = 1024;
    const double byHand = 6 * (L * 12 * C * C + C * V) + 12 * L * T * C;  // 8.54e8: 6N + attention
    const auto f = plan::flopsPerToken(gpt2Small(), {});
    EXPECT_NEAR(f.model, byHand, 1e-9 * byHand);
    EXPECT_EQ(f.hardware, f.model);
}

TEST(Flops, Llama3_8bByHand) {
    const double C = 4096, V = 128256, L = 32, T = 8192, kv = 8 * 128, H = 14336;
    const double weights = L * (C * C + 2 * C * kv + C * C + 3 * C * H) + C * V;  // 7.5e9: the embedding is a lookup
    const double byHand = 6 * weights + 12 * L * T * C;
    const auto f = plan::flopsPerToken(llama3_8b(), {});
    EXPECT_NEAR(f.model, byHand, 1e-9 * byHand);
    EXPECT_NEAR(f.model / 1e9, 57.9, 0.1);
}

TEST(Flops, ExpertsCountOnlyTheExpertsATokenIsRoutedTo) {
    auto c = llama3_8b();
    c.vocabSize = 32000;
    c.seqLen = 4096;
    c.experts.count = 8;
    c.experts.perToken = 2;
    c.experts.width = 14336;
    const double C = 4096, L = 32, T = 4096, kv = 1024, H = 14336;
    const double weights = L * (2 * C * C + 2 * C * kv + C * 8 + 2 * 3 * C * H) + C * 32000;  // the router too
    EXPECT_NEAR(plan::flopsPerToken(c, {}).model, 6 * weights + 12 * L * T * C, 1e-6 * weights);
}

TEST(Flops, RecomputationAddsTheForwardItRunsAgain) {
    auto c = gpt2Small();
    const double block = c.forwardFlopsPerToken(1);
    // Pipeline 0 (3 microbatches of 4) recomputes its first stage, layers 0-2 (the embedding and two blocks).
    const auto f = plan::flopsPerToken(c, {pipeline({0, 3, 14}, {1, 0}, 3), pipeline({0, 14}, {0}, 1)});
    EXPECT_NEAR(f.hardware - f.model, 0.75 * 2 * block, 1e-6 * block);
    c.recompute = arch::ModelConfig::Recompute::Selective;
    const auto s = plan::flopsPerToken(c, {pipeline({0, 14}, {0}, 1)});
    EXPECT_NEAR(s.hardware - s.model, 12 * 4.0 * 1024 * 768, 1.0);
}

TEST(Flops, PeaksByTheNamesDriversReport) {
    EXPECT_EQ(plan::devicePeakOf("NVIDIA H100 80GB HBM3")->bf16, 989);
    EXPECT_EQ(plan::devicePeakOf("NVIDIA H100 PCIe")->bf16, 756);
    EXPECT_EQ(plan::devicePeakOf("NVIDIA GH200 480GB")->name, "GH200");
    EXPECT_EQ(plan::devicePeakOf("NVIDIA H200")->tf32, 494);
    EXPECT_EQ(plan::devicePeakOf("NVIDIA A10")->name, "A10");
    EXPECT_EQ(plan::devicePeakOf("NVIDIA A100-SXM4-80GB")->name, "A100");
    EXPECT_EQ(plan::devicePeakOf("AMD Instinct MI300X")->bf16, 1307);
    EXPECT_EQ(plan::devicePeakOf("cpu"), nullptr);
}
