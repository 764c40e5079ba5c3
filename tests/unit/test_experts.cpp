// A mixture of experts' layer (issue 54): its parameters are what ModelConfig says, its output is the routing's
// sum written out token by token (softmax after and before top-k, a shared expert), its gradients agree with
// finite differences, the router's losses reach the gradient at the scale the step gives them, and the counts
// the planner uses (active parameters, FLOPs, a stage's share, the widths that can split it) follow the rule.
#include "kiln/arch/model_config.hpp"
#include "kiln/arch/shard_spec.hpp"
#include "kiln/model/gpt.hpp"
#include "kiln/model/router_record.hpp"
#include "../../src/model/layer_parts.hpp"
#include "layer_gradient_check.hpp"

#include <gtest/gtest.h>

using namespace kiln::model;
using namespace kiln::arch;

namespace {

ModelConfig expertConfig(Experts::Softmax softmax, std::uint32_t shared = 0) {
    ModelConfig c;
    c.family = Family::Llama;
    c.vocabSize = 40;
    c.blocks = 2;
    c.dModel = 16;
    c.heads = 4;
    c.kvHeads = 2;
    c.ffnHidden = 24;
    c.seqLen = 5;
    c.seed = 9;
    c.experts = {4, 2, 12, shared, softmax, 0.0, 0.0};
    return c;
}

// The expert MLP of `c`'s block 1, alone, with its parameters by name.
struct LoneExperts {
    torch::nn::Module holder;
    SliceHandle slice = std::make_shared<TensorSlice>();
    RouterHandle log = std::make_shared<RouterLog>();
    std::unique_ptr<kiln::model::detail::ExpertMlp> mlp;
    explicit LoneExperts(const ModelConfig& c) {
        torch::manual_seed(3);
        kiln::model::detail::ShardedParameters param(holder, c, 1, *slice);
        mlp = std::make_unique<kiln::model::detail::ExpertMlp>(c, 1, param, slice, log);
    }
    torch::Tensor operator[](const std::string& name) { return holder.named_parameters()[name]; }
};

torch::Tensor swiglu(const torch::Tensor& x, const torch::Tensor& gate, const torch::Tensor& up, const torch::Tensor& down) {
    return torch::matmul(torch::silu(torch::matmul(x, gate.t())) * torch::matmul(x, up.t()), down.t());
}

}  // namespace

TEST(Experts, ParameterShapesMatchTheLayer) {
    for (std::uint32_t shared : {0u, 8u}) {
        auto config = expertConfig(Experts::Softmax::AfterTopK, shared);
        config.qkNorm = config.qkNormProjection = true;
        const auto shapes = config.parameterShapes(1);
        const auto named = buildLayer(config, 1)->named_parameters();
        ASSERT_EQ(shapes.size(), named.size());
        ASSERT_EQ(shardSpecs(config, 1).size(), named.size());
        for (std::size_t k = 0; k < named.size(); ++k) {
            EXPECT_EQ(shapes[k].first, named[k].key());
            EXPECT_EQ(shapes[k].second, named[k].value().sizes().vec()) << shapes[k].first;
        }
        EXPECT_EQ(named["expert_gate_weight"].sizes().vec(), (std::vector<std::int64_t>{4, 12, 16}));
        EXPECT_EQ(named["q_norm_weight"].numel(), 16);  // over the projection: heads x head_dim
        EXPECT_EQ(named.contains("shared_gate_weight"), shared > 0);
        EXPECT_FALSE(named.contains("gate_weight"));  // no dense MLP beside the experts
    }
}

TEST(Experts, OutputIsTheRoutedSumTokenByToken) {
    for (auto softmax : {Experts::Softmax::AfterTopK, Experts::Softmax::BeforeTopK}) {
        for (std::uint32_t shared : {0u, 8u}) {
            const auto config = expertConfig(softmax, shared);
            LoneExperts experts(config);
            torch::NoGradGuard noGrad;
            // Random tokens (the experts' loads close: on a GPU, one batched product), then one token ten times
            // (two experts get everything: one product per expert).
            for (const auto& m : {torch::randn({2, 5, 16}), torch::randn({1, 1, 16}).expand({2, 5, 16}).contiguous()}) {
            const auto out = experts.mlp->forward(m).view({10, 16});
            const auto tokens = m.view({10, 16});
            const auto probabilities = torch::softmax(torch::matmul(tokens, experts["router_weight"].t()), -1);
            for (std::int64_t t = 0; t < 10; ++t) {
                // This token's two best experts, weighted as the softmax's place says.
                const auto [best, chosen] = probabilities[t].topk(2);
                auto weights = softmax == Experts::Softmax::AfterTopK ? best / best.sum() : best;
                auto want = torch::zeros({16});
                for (std::int64_t j = 0; j < 2; ++j) {
                    const auto e = chosen[j].item<std::int64_t>();
                    want += weights[j] * swiglu(tokens[t], experts["expert_gate_weight"][e], experts["expert_up_weight"][e],
                                                experts["expert_down_weight"][e]);
                }
                if (shared > 0)
                    want += swiglu(tokens[t], experts["shared_gate_weight"], experts["shared_up_weight"],
                                   experts["shared_down_weight"]);
                EXPECT_TRUE(torch::allclose(out[t], want, 1e-5, 1e-6)) << "token " << t << ": " << out[t] << " vs " << want;
            }
            }
        }
    }
}

TEST(Experts, BlockGradientMatchesFiniteDifferences) {
    // No router losses here (the check differentiates the output alone); routing is piecewise constant, and a
    // step of 1e-6 does not cross a choice.
    auto config = expertConfig(Experts::Softmax::AfterTopK, 8);
    torch::manual_seed(11);
    auto block = buildLayer(config, 1);
    EXPECT_GT(checkLayerGradients(block, config.dModel), 100);
}

TEST(Experts, RouterLossesReachTheGradientAtTheStepsScale) {
    // With only the balance loss weighted (and the output's gradient zero), the router's gradient is the
    // balance loss's, times the coefficient, T (the loss is in token units) and the step's scale.
    auto config = expertConfig(Experts::Softmax::AfterTopK);
    config.experts.auxLossCoef = 0.5;
    LoneExperts experts(config);
    experts.log->lossScale = 0.25;
    auto& record = experts.log->record;
    record.reset(config.blocks, config.experts.count);
    const auto m = torch::randn({3, 5, 16});
    experts.mlp->forward(m).backward(torch::zeros({3, 5, 16}));
    const auto gotGradient = experts["router_weight"].grad().clone();
    // The same loss written out: f_e (no gradient) times P_e per sequence, E times their sum, summed over sequences.
    const auto router = experts["router_weight"].detach().clone().requires_grad_(true);
    const auto probabilities = torch::softmax(torch::matmul(m.view({15, 16}), router.t()), -1);
    const auto chosen = std::get<1>(probabilities.detach().topk(2)).view({3, 10});
    const auto shares = torch::zeros({3, 4}).scatter_add_(1, chosen, torch::ones({3, 10})) / 10.0;
    const auto balance = 4.0 * (shares * probabilities.view({3, 5, 4}).mean(1)).sum(-1);
    (balance.sum() * (0.5 * 5 * 0.25)).backward();
    EXPECT_TRUE(torch::allclose(gotGradient, router.grad(), 1e-5, 1e-7)) << gotGradient << router.grad();
    // Recorded for the log: the sum over the sequences, and every token's k choices.
    EXPECT_NEAR(record.balanceSum[0], balance.sum().item<double>(), 1e-5);
    EXPECT_DOUBLE_EQ(record.load[0] + record.load[1] + record.load[2] + record.load[3], 30.0);
}

TEST(Experts, EachModelRecordsIntoItsOwnLog) {
    // Two models in one process (a trainer's and an export's, say): what one routes is not the other's record,
    // and each block's losses take its own model's scale.
    auto config = expertConfig(Experts::Softmax::AfterTopK);
    config.experts.auxLossCoef = 0.5;
    LoneExperts trained(config), other(config);
    trained.log->record.reset(config.blocks, config.experts.count);
    other.log->record.reset(config.blocks, config.experts.count);
    trained.log->lossScale = 0.25;
    other.log->lossScale = 0.5;
    const auto m = torch::randn({2, 4, 16});
    trained.mlp->forward(m).backward(torch::zeros({2, 4, 16}));
    double routed = 0.0;
    for (double l : trained.log->record.load) routed += l;
    EXPECT_DOUBLE_EQ(routed, 2.0 * 4 * 2) << "every token's k choices recorded where they were routed";
    for (double l : other.log->record.load) EXPECT_EQ(l, 0.0) << "the other model's log is untouched";
    // The same weights (seeded alike), the other scale: the router's gradient doubles.
    other.mlp->forward(m).backward(torch::zeros({2, 4, 16}));
    EXPECT_TRUE(torch::allclose(other["router_weight"].grad(), 2.0 * trained["router_weight"].grad(), 1e-5, 1e-7));
}

TEST(Experts, PlannerCountsActiveParametersAndSplitsWholeExperts) {
    const auto config = expertConfig(Experts::Softmax::AfterTopK, 8);
    const std::uint64_t perExpert = 3 * 12 * 16;
    EXPECT_EQ(config.parameters() - config.activeParameters(), 2 * (4 - 2) * perExpert);  // 2 blocks, 2 experts idle
    // Router (16 x 4), two experts and the shared one, beside attention: FLOPs of the active weights only.
    ModelConfig dense = config;
    dense.experts = {};
    dense.ffnHidden = 2 * 12 + 8;  // the same active SwiGLU width
    EXPECT_DOUBLE_EQ(config.forwardFlopsPerToken(1) - dense.forwardFlopsPerToken(1), 2.0 * 16 * 4);
    // A 2-wide stage holds 2 whole experts on each rank, the router whole.
    const auto specs = shardSpecs(config, 1);
    const auto shapes = config.parameterShapes(1);
    for (std::size_t k = 0; k < shapes.size(); ++k) {
        if (shapes[k].first == "expert_down_weight")
            EXPECT_EQ(shardShape(shapes[k].second, specs[k], 2, 1), (std::vector<std::int64_t>{2, 16, 12}));
        if (shapes[k].first == "router_weight") EXPECT_TRUE(specs[k].replicated());
    }
    EXPECT_EQ(widthProblem(config, 2), "");
    ModelConfig six = config;  // 4 key/value heads: a 4-wide stage may split attention, not 6 experts
    six.kvHeads = 4;
    six.experts.count = 6;
    EXPECT_NE(widthProblem(six, 4).find("model.experts = 6 is not a multiple of 4"), std::string::npos)
        << widthProblem(six, 4);
}
