// Tensor-parallel layers on 4 ranks: split into stages of width 1, 2 and 4
// (consecutive ranks), every stage runs the whole model on the same batch.
// Each rank also runs the unsplit model alone; the split stage must give the
// same loss and, for every parameter, the shard of the unsplit gradient
// (float32, to 1e-5 relative), and its layers must hold the shards of the
// unsplit initial weights. Uneven splits are included: 3 heads over 2 ranks,
// a vocabulary of 61 over 4. A mixture of experts (OLMoE's q/k norms over the
// projections, a shared expert, both router losses) spreads its experts over
// the stage, also when a microbatch's two tokens leave two of four ranks'
// experts without one. Then what builds on shards: gradient sums
// between replicas of different widths, and the checkpoint writers' choice.
#include "kiln/comm/transport.hpp"
#include "kiln/model/gpt.hpp"
#include "kiln/model/tensor_parallel.hpp"
#include "kiln/plan/layout.hpp"
#include "kiln/train/checkpoint_parts.hpp"
#include "kiln/train/gradient_sync.hpp"

#include <gtest/gtest.h>
#include <mpi.h>
#include <torch/torch.h>

#include <algorithm>
#include <map>

namespace {

using kiln::model::Gpt;
using kiln::arch::ModelConfig;

ModelConfig smallModel(std::uint32_t heads) {
    ModelConfig c;
    c.vocabSize = 61;
    c.blocks = 2;
    c.dModel = 4 * heads;
    c.heads = heads;
    c.seqLen = 8;
    return c;
}

struct Stage {
    std::unique_ptr<kiln::comm::Transport> transport;
    kiln::model::SliceHandle slice = std::make_shared<kiln::model::TensorSlice>();
};

// This rank's place in a stage of `width` consecutive ranks, summing over MPI.
Stage stageOf(int width) {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    Stage s;
    std::vector<int> group;
    for (int r = rank / width * width; r < (rank / width + 1) * width; ++r) group.push_back(r);
    s.transport = kiln::comm::makeMpiGroupTransport(MPI_COMM_WORLD, group, 40 + width);
    s.slice->rank = rank % width;
    s.slice->width = width;
    auto* t = s.transport.get();
    s.slice->allReduce = [t](torch::Tensor& x) { t->allReduceSum(x.data_ptr<float>(), static_cast<std::size_t>(x.numel())); };
    return s;
}

void expectClose(const torch::Tensor& got, const torch::Tensor& want, const std::string& what) {
    ASSERT_EQ(got.sizes(), want.sizes()) << what;
    const double scale = want.abs().max().item<double>() + 1e-6;
    EXPECT_LE((got - want).abs().max().item<double>() / scale, 1e-5) << what;
}

// A llama with 4 experts (its q/k norms over the projections, as OLMoE's, a shared expert and both router
// losses), `perToken` chosen per token, sequences of `seqLen`.
ModelConfig expertModel(std::uint32_t perToken, std::uint32_t seqLen) {
    ModelConfig c = smallModel(4);
    c.family = kiln::arch::Family::Llama;
    c.kvHeads = 4;
    c.qkNorm = c.qkNormProjection = true;
    c.experts = {4, perToken, 8, 8, kiln::arch::Experts::Softmax::AfterTopK, 0.01, 0.001};
    c.seqLen = seqLen;
    return c;
}

void compareWidth(const ModelConfig& config, int width, std::int64_t samples = 3) {
    torch::manual_seed(7);
    const auto ids = torch::randint(config.vocabSize, {samples, config.seqLen + 1}, torch::kInt64);
    const auto input = ids.slice(1, 0, config.seqLen), targets = ids.slice(1, 1, config.seqLen + 1);

    Gpt whole(config);
    const auto wholeLoss = whole.lossSum(whole.forward(input), targets);
    wholeLoss.backward();

    Stage stage = stageOf(width);
    Gpt split(config, 0, ~0u, stage.slice);
    const auto loss = split.lossSum(split.forward(input), targets);
    loss.backward();
    EXPECT_NEAR(loss.item<double>(), wholeLoss.item<double>(), 1e-5 * wholeLoss.item<double>())
        << "width " << width << ", " << config.heads << " heads";
    for (std::uint32_t l = 0; l < config.numLayers(); ++l) {
        const auto specs = kiln::arch::shardSpecs(config, l);
        const auto mine = split.layer(l).named_parameters(), theirs = whole.layer(l).named_parameters();
        ASSERT_EQ(mine.size(), specs.size());
        for (std::size_t k = 0; k < specs.size(); ++k) {
            const std::string what = "layer " + std::to_string(l) + " " + mine[k].key() + ", width " + std::to_string(width) +
                                     ", rank " + std::to_string(stage.slice->rank);
            const auto shape = kiln::arch::shardShape(config.parameterShapes(l)[k].second, specs[k], width, stage.slice->rank);
            EXPECT_EQ(mine[k].value().sizes().vec(), shape) << what;
            expectClose(mine[k].value().detach(), kiln::model::shardOf(theirs[k].value().detach(), specs[k], width, stage.slice->rank), what);
            expectClose(mine[k].value().grad(), kiln::model::shardOf(theirs[k].value().grad(), specs[k], width, stage.slice->rank),
                        what + " gradient");
        }
    }
}

void compareWidth(std::uint32_t heads, int width) { compareWidth(smallModel(heads), width); }

}  // namespace

TEST(TensorParallel, SplitStagesEqualTheWholeModel) {
    int size = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    ASSERT_EQ(size, 4) << "stages of width 1, 2 and 4 need 4 ranks";
    for (int width : {1, 2, 4}) compareWidth(4, width);
}

TEST(TensorParallel, UnevenSplits) {
    compareWidth(3, 2);  // heads 2 + 1 (and 61 vocabulary rows as 30 + 31)
}

TEST(TensorParallel, ExpertsSpreadOverTheStage) {
    for (int width : {1, 2, 4}) compareWidth(expertModel(2, 8), width);
}

TEST(TensorParallel, ExpertsThatNoTokenReaches) {
    // Two tokens, one expert each: at least two of the four ranks run none of theirs, and still take part in
    // every sum. (Two, not one: a single token attends to itself alone, and q and k would have no gradient to
    // compare but rounding.)
    compareWidth(expertModel(1, 2), 4, 1);
}

TEST(TensorParallel, ShardsAreRunsOfAtoms) {
    // A shard of any width is the concatenation of the finest width's shards it covers.
    const auto config = smallModel(4);
    Gpt whole(config);
    for (std::uint32_t l = 0; l < config.numLayers(); ++l) {
        const auto specs = kiln::arch::shardSpecs(config, l);
        const auto params = whole.layer(l).parameters();
        for (std::size_t k = 0; k < specs.size(); ++k) {
            if (specs[k].replicated()) continue;
            const auto half = kiln::model::shardOf(params[k].detach(), specs[k], 2, 1);
            const auto heldRange = kiln::arch::unitRange(specs[k].units, 2, 1);
            for (int atom : {2, 3}) {
                const auto atomRange = kiln::arch::unitRange(specs[k].units, 4, atom);
                const auto views = kiln::model::unitViews(half, specs[k], heldRange, atomRange);
                EXPECT_TRUE(torch::equal(torch::cat(views, specs[k].dim),
                                         kiln::model::shardOf(params[k].detach(), specs[k], 4, atom)))
                    << "layer " << l << " parameter " << k << " atom " << atom;
            }
        }
    }
}

// (Below: rank 3 holds no layer; its empty Gpt is built with first = 0, last = 0.)
// Gradient sums between replicas that split the same layers differently:
// pipeline 0 is one stage 2 ranks wide (ranks 0 and 1), pipeline 1 one stage
// of one rank (rank 2); rank 3 is idle. Pipeline p's whole gradient of every
// parameter is a known tensor; after the sums every rank must hold its part
// of the sum of both, and the squared norms must add up to the whole sum's.
TEST(TensorParallel, SumsPairAtomsAcrossWidths) {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const auto config = smallModel(4);
    kiln::plan::Layout layout;
    layout.layers = config.numLayers();
    kiln::plan::PipelinePlacement p0, p1;
    p0.width = 2;
    p0.ranks = {0, 1};
    p1.ranks = {2};
    layout.pipelines = {p0, p1};
    layout.roles.resize(4);
    for (int r : {0, 1, 2}) {
        auto& role = layout.roles[static_cast<std::size_t>(r)];
        role.pipeline = r < 2 ? 0 : 1;
        role.stages = 1;
        role.endLayer = layout.layers;
        role.slot = r < 2 ? static_cast<std::uint32_t>(r) : 0;
        role.width = r < 2 ? 2 : 1;
    }
    layout.segments = {{0, layout.layers, {0, 1, 2}, {2, 1}}};
    const auto role = layout.role(rank);
    auto slice = std::make_shared<kiln::model::TensorSlice>();
    slice->rank = static_cast<int>(role.slot);
    slice->width = static_cast<int>(role.width);
    Gpt model(config, 0, rank == 3 ? 0 : ~0u, slice);
    const auto wholeGradient = [&](int pipeline, std::uint32_t l, std::size_t k) {
        const auto shape = config.parameterShapes(l)[k].second;
        std::int64_t n = 1;
        for (auto d : shape) n *= d;
        auto g = torch::arange(n, torch::kInt64).remainder(5 + static_cast<std::int64_t>(k))
                     .to(torch::kFloat32) * 0.25f;
        return (g + static_cast<float>(pipeline + 1) + 0.5f * static_cast<float>(l)).view(shape);
    };
    for (std::uint32_t l = 0; l < model.numLayers(); ++l) {
        const auto specs = kiln::arch::shardSpecs(config, l);
        auto params = model.layer(l).parameters();
        for (std::size_t k = 0; k < params.size(); ++k)
            params[k].mutable_grad() = kiln::model::shardOf(wholeGradient(role.pipeline, l, k), specs[k], role.width, role.slot);
    }
    kiln::train::GradientSync sync(layout, MPI_COMM_WORLD, model, 4096, [](MPI_Comm comm, const std::vector<int>& group, int tag) {
        return kiln::comm::makeMpiGroupTransport(comm, group, tag);
    });
    sync.beginStep();
    sync.finish(model, torch::kCPU);
    double wholeNorm = 0.0;
    for (std::uint32_t l = 0; l < config.numLayers(); ++l) {
        const auto specs = kiln::arch::shardSpecs(config, l);
        for (std::size_t k = 0; k < specs.size(); ++k) {
            const auto sum = wholeGradient(0, l, k) + wholeGradient(1, l, k);
            wholeNorm += sum.square().sum().item<double>();
            if (rank == 3) continue;
            expectClose(model.layer(l).parameters()[k].grad(), kiln::model::shardOf(sum, specs[k], role.width, role.slot),
                        "rank " + std::to_string(rank) + " layer " + std::to_string(l) + " parameter " + std::to_string(k));
        }
    }
    double norm = sync.squaredNorm(model), total = 0.0;
    MPI_Allreduce(&norm, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    EXPECT_NEAR(total, wholeNorm, 1e-6 * wholeNorm);  // float32 norms, added in float64
}

// Checkpoint writers: every layer goes to one of its holding stages, and the
// bytes spread over the stages' first ranks (here three replicas of a model
// whose layers all hold about as much: every replica writes, and no writer
// has more than one layer's worth above another).
TEST(CheckpointWriters, SpreadOverEveryReplica) {
    const auto config = smallModel(4);
    kiln::train::LayerHolders holders(config.numLayers());
    for (auto& stages : holders) stages = {{0}, {1, 2}, {3}};  // a one-rank, a 2-wide and a one-rank replica
    const auto writers = kiln::train::assignWriters(config, holders);
    std::map<int, std::uint64_t> bytes;
    std::uint64_t largest = 0;
    for (std::uint32_t l = 0; l < config.numLayers(); ++l) {
        ASSERT_FALSE(writers[l].empty());
        EXPECT_NE(std::find(holders[l].begin(), holders[l].end(), writers[l]), holders[l].end()) << "layer " << l;
        bytes[writers[l].front()] += 12 * config.parametersOf(l);
        largest = std::max<std::uint64_t>(largest, 12 * config.parametersOf(l));
    }
    EXPECT_EQ(bytes.size(), 3u) << "every replica writes";
    std::uint64_t low = ~0ull, high = 0;
    for (const auto& [rank, b] : bytes) {
        low = std::min(low, b);
        high = std::max(high, b);
    }
    EXPECT_LE(high - low, largest);
}
