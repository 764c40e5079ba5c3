// The llama family (issue 38, item 1): its layers hold what ModelConfig says,
// a block's gradients agree with finite differences, rotary embeddings turn
// each pair of a head's dimensions by its position's angle, grouped-query
// attention equals multi-head attention with the key/value heads repeated, and
// the deck refuses what the family cannot express, naming the key, a tied
// head starts as the embedding and counts once, and the rotary scalings
// (llama3, linear, yarn) change the frequencies as their rules say.
#include "kiln/base/error.hpp"
#include "kiln/config/deck.hpp"
#include "kiln/model/gpt.hpp"
#include "kiln/model/llama_ops.hpp"
#include "kiln/arch/model_config.hpp"
#include "kiln/arch/shard_spec.hpp"
#include "layer_gradient_check.hpp"

#include <cmath>

#include <gtest/gtest.h>

using namespace kiln::model;
using namespace kiln::arch;

namespace {

ModelConfig llamaConfig(std::uint32_t kvHeads) {
    ModelConfig c;
    c.family = Family::Llama;
    c.vocabSize = 40;
    c.blocks = 2;
    c.dModel = 16;
    c.heads = 4;
    c.kvHeads = kvHeads;
    c.ffnHidden = 24;
    c.seqLen = 6;
    c.seed = 5;
    return c;
}

std::string errorOf(const std::string& deckText) {
    try {
        modelConfigFromDeck(kiln::config::Deck::fromText(deckText, "l.ini"), 40);
    } catch (const kiln::InputError& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST(Llama, ParameterShapesMatchTheLayers) {
    for (std::uint32_t kv : {1u, 2u, 4u}) {
        const auto config = llamaConfig(kv);
        std::uint64_t total = 0;
        for (std::uint32_t i = 0; i < config.numLayers(); ++i) {
            const auto shapes = config.parameterShapes(i);
            const auto named = buildLayer(config, i)->named_parameters();
            ASSERT_EQ(shapes.size(), named.size()) << "layer " << i;
            ASSERT_EQ(shardSpecs(config, i).size(), named.size()) << "layer " << i;
            for (std::size_t k = 0; k < named.size(); ++k) {
                EXPECT_EQ(shapes[k].first, named[k].key()) << "layer " << i;
                EXPECT_EQ(shapes[k].second, named[k].value().sizes().vec()) << "layer " << i << " " << named[k].key();
                total += static_cast<std::uint64_t>(named[k].value().numel());
            }
        }
        EXPECT_EQ(total, config.parameters()) << "kv_heads " << kv;
        // By hand: embedding V C; per block 2 norms, q and o (C x C), k and v (C x kv hd), gate, up, down; norm and head.
        const std::uint64_t C = 16, V = 40, F = 24, kvWidth = kv * 4;
        EXPECT_EQ(config.parameters(), V * C + 2 * (2 * C + 2 * C * C + 2 * C * kvWidth + 3 * C * F) + C + V * C);
    }
}

// Qwen's variants (issue 53): q/k/v biases, q/k norms per head and a head_dim apart from d_model / heads, alone
// and together: the layers hold what ModelConfig and the shard specs say, counted by hand, and a block's
// gradients (the biases' and norms' among them) agree with finite differences.
TEST(Llama, QwenVariantsHoldWhatTheConfigSaysAndDifferentiate) {
    for (int variant = 0; variant < 3; ++variant) {
        auto config = llamaConfig(2);
        config.qkvBias = variant != 1;
        config.qkNorm = variant != 0;
        config.headDimension = variant == 0 ? 0 : 6;  // 4 heads of 6 = 24 query columns on a 16-wide stream
        const std::uint64_t C = 16, V = 40, F = 24, hd = config.headDim(), Q = 4 * hd, KV = 2 * hd;
        std::uint64_t total = 0;
        for (std::uint32_t i = 0; i < config.numLayers(); ++i) {
            const auto shapes = config.parameterShapes(i);
            const auto named = buildLayer(config, i)->named_parameters();
            ASSERT_EQ(shapes.size(), named.size()) << "variant " << variant << " layer " << i;
            ASSERT_EQ(shardSpecs(config, i).size(), named.size()) << "variant " << variant << " layer " << i;
            for (std::size_t k = 0; k < named.size(); ++k) {
                EXPECT_EQ(shapes[k].first, named[k].key());
                EXPECT_EQ(shapes[k].second, named[k].value().sizes().vec()) << named[k].key();
                total += static_cast<std::uint64_t>(named[k].value().numel());
            }
        }
        const std::uint64_t block = 2 * C + 2 * C * Q + 2 * C * KV + 3 * C * F + (config.qkvBias ? Q + 2 * KV : 0) +
                                    (config.qkNorm ? 2 * hd : 0);
        EXPECT_EQ(total, config.parameters());
        EXPECT_EQ(config.parameters(), V * C + 2 * block + C + V * C) << "variant " << variant;
        Layer layer = buildLayer(config, 1);
        {
            torch::NoGradGuard noGrad;
            for (auto& p : layer->parameters())  // biases start at 0 and norms at 1: moved, so that each one counts
                if (p.dim() == 1) p.add_(torch::randn(p.sizes(), p.options()) * 0.3);
        }
        torch::manual_seed(4);
        EXPECT_GT(checkLayerGradients(layer, 16), 60) << "variant " << variant;
    }
}

// Sliding-window attention (issue 53, Mistral v0.1): a window as long as the sequence changes nothing, a shorter
// one changes the output from the first position past it on only; the block's gradients agree with finite
// differences, and selective recomputation (attention's core run again in backward) gives the same gradients.
TEST(Llama, SlidingWindowMasksOnlyWhatLiesBeyondIt) {
    auto full = llamaConfig(2), windowed = llamaConfig(2);
    windowed.slidingWindow = 3;
    Layer a = buildLayer(full, 1), b = buildLayer(windowed, 1);
    torch::manual_seed(6);
    const auto x = torch::randn({2, 6, 16});
    const auto ya = a->forward(x), yb = b->forward(x);
    EXPECT_TRUE(torch::allclose(ya.narrow(1, 0, 3), yb.narrow(1, 0, 3)));  // positions 0-2 see all before them
    EXPECT_FALSE(torch::allclose(ya.narrow(1, 3, 3), yb.narrow(1, 3, 3), 1e-4, 1e-5));
    windowed.slidingWindow = 6;
    EXPECT_TRUE(torch::allclose(ya, buildLayer(windowed, 1)->forward(x)));
    windowed.slidingWindow = 2;
    Layer plain = buildLayer(windowed, 1);
    torch::manual_seed(7);
    EXPECT_GT(checkLayerGradients(plain, 16), 60);
    Layer stored = buildLayer(windowed, 1);  // fresh: no gradients accumulated yet
    windowed.recompute = ModelConfig::Recompute::Selective;
    Layer recomputed = buildLayer(windowed, 1);
    stored->to(torch::kFloat64);
    recomputed->to(torch::kFloat64);
    const auto input = torch::randn({2, 5, 16}, torch::kFloat64);
    std::vector<torch::Tensor> grads[2];
    int which = 0;
    for (Layer* layer : {&stored, &recomputed}) {
        (*layer)->forward(input).pow(2).sum().backward();
        for (const auto& p : (*layer)->parameters()) grads[which].push_back(p.grad().clone());
        ++which;
    }
    ASSERT_EQ(grads[0].size(), grads[1].size());
    for (std::size_t k = 0; k < grads[0].size(); ++k) EXPECT_TRUE(torch::allclose(grads[0][k], grads[1][k], 1e-9, 1e-12)) << k;
}

TEST(Llama, BlockGradientMatchesFiniteDifferences) {
    Layer block = buildLayer(llamaConfig(2), 1);
    torch::manual_seed(3);
    EXPECT_GT(checkLayerGradients(block, 16), 60);
}

// Llama 3.1's scaling (issue 53), by the rule itself in double precision: wavelengths below original / high are
// kept, above original / low divided by the factor, and those between blended by how far they lie between.
TEST(Llama, Llama3ScalingKeepsBlendsAndDividesByWavelength) {
    RopeScaling rope;
    rope.kind = RopeScaling::Kind::Llama3;
    rope.factor = 8.0;
    rope.lowFreqFactor = 1.0;
    rope.highFreqFactor = 4.0;
    rope.originalContext = 64;
    const std::int64_t hd = 16;
    const double theta = 500000.0;
    const auto scaled = rotaryInverseFrequencies(hd, theta, rope, torch::kCPU);
    int kept = 0, blended = 0, divided = 0;
    for (std::int64_t i = 0; i < hd / 2; ++i) {
        const double inverse = 1.0 / std::pow(theta, double(2 * i) / hd), wavelength = 2 * M_PI / inverse;
        double expected = inverse;
        if (wavelength > 64.0) {
            expected = inverse / 8.0;
            ++divided;
        } else if (wavelength >= 16.0) {
            const double smooth = (64.0 / wavelength - 1.0) / (4.0 - 1.0);
            expected = (1 - smooth) * inverse / 8.0 + smooth * inverse;
            ++blended;
        } else {
            ++kept;
        }
        EXPECT_NEAR(scaled[i].item<double>(), expected, 1e-6 * expected) << "frequency " << i;
    }
    EXPECT_EQ(kept, 1);
    EXPECT_EQ(blended, 1);
    EXPECT_EQ(divided, 6);
    // Linear divides every one; none leaves them as they are; yarn's cosines carry 0.1 ln(factor) + 1.
    rope.kind = RopeScaling::Kind::Linear;
    const auto linear = rotaryInverseFrequencies(hd, theta, rope, torch::kCPU);
    const auto plain = rotaryInverseFrequencies(hd, theta, RopeScaling{}, torch::kCPU);
    EXPECT_TRUE(torch::allclose(linear * 8.0, plain));
    rope.kind = RopeScaling::Kind::Yarn;
    rope.factor = 4.0;
    EXPECT_DOUBLE_EQ(rope.attentionScaling(), 0.1 * std::log(4.0) + 1.0);
    const auto yarn = rotaryAngles(3, hd, theta, torch::zeros({1}, torch::kFloat32), rope);
    EXPECT_NEAR(yarn.cos[0][0].item<double>(), rope.attentionScaling(), 1e-6);  // position 0: cos 0 = 1, scaled
}

TEST(Llama, RotaryTurnsEachPairByItsPositionsAngle) {
    const std::int64_t T = 5, hd = 8;
    const double theta = 500000.0;
    const auto x = torch::randn({1, 2, T, hd}, torch::kFloat64);
    const auto rotated = applyRotary(x, theta);
    for (std::int64_t h = 0; h < 2; ++h)
        for (std::int64_t t = 0; t < T; ++t)
            for (std::int64_t i = 0; i < hd / 2; ++i) {
                // The angle as float32 computes it, as Hugging Face does.
                const float inverse = 1.0f / std::pow(static_cast<float>(theta), static_cast<float>(2 * i) / hd);
                const double angle = static_cast<float>(t) * inverse;
                const double a = x[0][h][t][i].item<double>(), b = x[0][h][t][i + hd / 2].item<double>();
                EXPECT_NEAR(rotated[0][h][t][i].item<double>(), a * std::cos(angle) - b * std::sin(angle), 1e-6);
                EXPECT_NEAR(rotated[0][h][t][i + hd / 2].item<double>(), b * std::cos(angle) + a * std::sin(angle), 1e-6);
            }
    // Position 0 is not turned; a rotation keeps each pair's length.
    EXPECT_TRUE(torch::allclose(rotated.select(2, 0), x.select(2, 0)));
    EXPECT_TRUE(torch::allclose(rotated.pow(2).sum(-1), x.pow(2).sum(-1)));
}

TEST(Llama, RmsNormScalesByTheRootMeanSquare) {
    const auto x = torch::tensor({{3.0, 4.0}}, torch::kFloat32), weight = torch::tensor({1.0, 2.0}, torch::kFloat32);
    const auto y = rmsNorm(x, weight, 0.0);
    const double rms = std::sqrt((9.0 + 16.0) / 2);
    EXPECT_NEAR(y[0][0].item<double>(), 3.0 / rms, 1e-6);
    EXPECT_NEAR(y[0][1].item<double>(), 2 * 4.0 / rms, 1e-6);
}

TEST(Llama, GroupedQueryAttentionIsMultiHeadWithKeyValueHeadsRepeated) {
    // Key/value head j serves query heads 2j and 2j + 1 (kv_heads = 2 of 4): the same block with 4 key/value
    // heads, each a copy of its group's, computes the same.
    const auto grouped = llamaConfig(2), full = llamaConfig(4);
    Layer a = buildLayer(grouped, 1), b = buildLayer(full, 1);
    {
        torch::NoGradGuard noGrad;
        auto pa = a->named_parameters(), pb = b->named_parameters();
        for (const auto& item : pa) {
            auto target = pb[item.key()];
            if (item.key() == "k_weight" || item.key() == "v_weight")
                target.copy_(item.value().view({2, 1, 4, 16}).expand({2, 2, 4, 16}).reshape({16, 16}));
            else
                target.copy_(item.value());
        }
    }
    torch::manual_seed(9);
    const auto x = torch::randn({3, 6, 16});
    EXPECT_TRUE(torch::allclose(a->forward(x), b->forward(x), 1e-5, 1e-6));
    // And the grouping matters: pairing the other way round computes something else.
    {
        torch::NoGradGuard noGrad;
        auto pa = a->named_parameters(), pb = b->named_parameters();
        pb["k_weight"].copy_(pa["k_weight"].view({2, 4, 16}).repeat({2, 1, 1}).reshape({16, 16}));
    }
    EXPECT_FALSE(torch::allclose(a->forward(x), b->forward(x), 1e-5, 1e-6));
}

TEST(Llama, TheDeckRefusesWhatTheFamilyCannotExpressNamingTheKey) {
    const std::string llama = "[model]\nfamily = llama\nd_model = 16\nheads = 4\n";
    const auto c = modelConfigFromDeck(kiln::config::Deck::fromText(llama, "l.ini"), 40);
    EXPECT_TRUE(c.llama());
    EXPECT_EQ(c.keyValueHeads(), 4u);        // 0: as many as the query heads
    EXPECT_EQ(c.ffnHidden, 256u);            // 8/3 of 16, rounded up to a multiple of 256
    EXPECT_EQ(llamaFfnHidden(4096), 11008u);  // Llama 2 7B's
    EXPECT_EQ(llamaFfnHidden(2048), 5632u);
    EXPECT_NE(errorOf(llama + "kv_heads = 3\n").find("l.ini:5: model.kv_heads = 3 does not divide model.heads = 4"),
              std::string::npos)
        << errorOf(llama + "kv_heads = 3\n");
    EXPECT_NE(errorOf("[model]\nfamily = llama\nd_model = 12\nheads = 4\n").find("is odd"), std::string::npos);
    EXPECT_NE(errorOf("[model]\nfamily = mamba\n").find("model.family"), std::string::npos);
    // Qwen's keys (issue 53): a head_dim frees d_model from the heads, must be even, and is the llama family's.
    EXPECT_EQ(errorOf("[model]\nfamily = llama\nd_model = 20\nheads = 3\nhead_dim = 8\n"), "");
    EXPECT_NE(errorOf("[model]\nfamily = llama\nd_model = 20\nheads = 3\n").find("or set model.head_dim"), std::string::npos);
    EXPECT_NE(errorOf("[model]\nfamily = llama\nhead_dim = 7\n").find("l.ini:3: a head's width (model.head_dim) = 7 is odd"),
              std::string::npos)
        << errorOf("[model]\nfamily = llama\nhead_dim = 7\n");
    EXPECT_NE(errorOf("[model]\nqkv_bias = true\n").find("l.ini:2: model.qkv_bias is a llama-family setting"),
              std::string::npos)
        << errorOf("[model]\nqkv_bias = true\n");
    EXPECT_NE(errorOf("[model]\nfamily = llama\nrope_scaling = llama3\n").find("needs model.rope_original_context"),
              std::string::npos);
    // A stage width must divide the key/value heads; gpt2 only needs a head per rank.
    EXPECT_EQ(widthProblem(llamaConfig(2), 2), "");
    EXPECT_NE(widthProblem(llamaConfig(1), 2).find("model.kv_heads = 1"), std::string::npos);
    auto gpt2 = llamaConfig(1);
    gpt2.family = Family::Gpt2;
    EXPECT_EQ(widthProblem(gpt2, 2), "");
}

TEST(Llama, ATiedHeadStartsAsTheEmbeddingAndCountsOnce) {
    for (const auto family : {Family::Llama, Family::Gpt2}) {
        auto c = llamaConfig(2);
        c.family = family;
        const auto untied = c.parameters();
        c.tieEmbeddings = true;
        EXPECT_EQ(c.parameters(), untied - 40u * 16u) << familyName(family);
        EXPECT_EQ(c.parametersOf(c.numLayers() - 1), c.parametersOf(c.numLayers() - 1)) << "the last stage holds its copy";
        const auto last = c.numLayers() - 1;
        EXPECT_EQ(c.parameterShapes(last)[c.headIndex()].first, "head_weight");
        EXPECT_EQ(c.parameterShapes(0)[ModelConfig::kTokenEmbedding].first, "token_embedding");
        EXPECT_TRUE(c.isTiedHead(last, c.headIndex()));
        EXPECT_FALSE(c.isTiedHead(0, ModelConfig::kTokenEmbedding));
        // Built in either order, on any rank: the head is the embedding's values.
        const Layer head = buildLayer(c, last), embedding = buildLayer(c, 0);
        const auto table = embedding->parameters()[ModelConfig::kTokenEmbedding];
        EXPECT_TRUE(torch::equal(head->parameters()[c.headIndex()], table)) << familyName(family);
        c.tieEmbeddings = false;
        EXPECT_FALSE(torch::equal(buildLayer(c, last)->parameters()[c.headIndex()], table)) << "untied: its own draw";
        EXPECT_TRUE(torch::equal(buildLayer(c, 0)->parameters()[0], table)) << "tying does not change the embedding";
    }
    const auto tied = modelConfigFromDeck(
        kiln::config::Deck::fromText("[model]\nfamily = llama\nd_model = 16\nheads = 4\ntie_embeddings = true\n", "l.ini"), 40);
    EXPECT_TRUE(tied.tieEmbeddings);
    EXPECT_NE(tied.shapeText().find("tied embeddings"), std::string::npos) << tied.shapeText();
}
