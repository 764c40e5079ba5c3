// Gradient sums over heterogeneous replicas and the layer-by-layer backward
// that lets them start early, on 3 ranks: pipeline 0 has two stages (rank 0:
// layers 0-1, rank 1: layers 2-4), pipeline 1 one (rank 2: all five), so
// rank 2 sums with rank 0 and with rank 1 over two communicators.
//  - Summing with buckets started layer by layer (from the last, tiny buckets,
//    blocking MPI sums) gives the same sums as starting all at the end, and
//    the squared norms add up to the whole model's.
//  - With a tied head, the embedding's and the head's holders (ranks 0 and 2,
//    ranks 1 and 2) sum the one tied gradient: all four copies hold the sum
//    of the four, rank 2 adding its two before, and the norm counts it once.
//  - The last microbatch's backward run one layer at a time reports every
//    layer once, from the last, with its final gradient at that moment, and
//    leaves the same gradients and loss as one backward.
#include "kiln/comm/transport.hpp"
#include "kiln/fault/fault_injector.hpp"
#include "kiln/model/gpt.hpp"
#include "kiln/plan/layout.hpp"
#include "kiln/train/gradient_sync.hpp"
#include "kiln/train/pipeline_stage.hpp"

#include <gtest/gtest.h>
#include <mpi.h>
#include <torch/torch.h>

#include <cmath>

namespace {

using kiln::model::Gpt;
using kiln::arch::ModelConfig;

ModelConfig smallModel() {
    ModelConfig c;
    c.vocabSize = 61;
    c.blocks = 3;
    c.dModel = 16;
    c.heads = 2;
    c.seqLen = 8;
    return c;
}

int worldRank() {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return rank;
}

// The 3-rank layout of the header: only the segments matter to the sums.
kiln::plan::Layout threeRanks() {
    kiln::plan::Layout layout;
    layout.layers = 5;
    layout.segments = {{0, 2, {0, 2}}, {2, 5, {1, 2}}};
    return layout;
}

// Rank r's gradient of parameter element i of layer l: known everywhere.
float gradientValue(int rank, std::uint32_t layer, std::int64_t i) {
    return static_cast<float>(rank + 1) * 0.5f + static_cast<float>(layer) + static_cast<float>(i % 7) * 0.25f;
}

void setGradients(Gpt& model, int rank) {
    for (std::uint32_t k = 0; k < model.numLayers(); ++k)
        for (auto& p : model.layer(k).parameters()) {
            auto g = torch::arange(p.numel(), torch::kInt64).remainder(7).to(torch::kFloat32) * 0.25f;
            g += static_cast<float>(rank + 1) * 0.5f + static_cast<float>(model.firstLayer() + k);
            p.mutable_grad() = g.view_as(p).clone();
        }
}

kiln::train::GradientSync::TransportFactory mpi() {
    return [](MPI_Comm comm, const std::vector<int>& group, int tag) {
        return kiln::comm::makeMpiGroupTransport(comm, group, tag);
    };
}

}  // namespace

TEST(GradientSums, LayerByLayerEqualsAllAtTheEnd) {
    int size = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    ASSERT_EQ(size, 3) << "the layout of this test is for 3 ranks";
    const int rank = worldRank();
    const auto layout = threeRanks();
    const std::uint32_t first = rank == 1 ? 2 : 0, end = rank == 0 ? 2 : 5;
    const int other = rank == 2 ? -1 : 2;  // rank 2 sums with 0 for layers 0-1 and with 1 for 2-4
    Gpt model(smallModel(), first, end);

    std::vector<std::vector<torch::Tensor>> results;
    std::vector<double> squaredNorms;
    for (const bool byLayer : {false, true}) {
        // 600 bytes: most tensors alone in a bucket, the small ones together.
        kiln::train::GradientSync sums(layout, MPI_COMM_WORLD, model, byLayer ? 600 : 64 << 20, mpi());
        EXPECT_FALSE(sums.asynchronous()) << "MPI sums block the rank";
        setGradients(model, rank);
        int firstBuckets = 0;
        sums.beginStep([&] { ++firstBuckets; });
        if (byLayer)
            for (std::uint32_t l = end; l-- > first;) sums.layerReady(l);
        const auto bytes = sums.finish(model, torch::kCPU);
        EXPECT_EQ(firstBuckets, 1);
        std::uint64_t expectedBytes = 0;
        for (std::uint32_t l = first; l < end; ++l) expectedBytes += smallModel().parametersOf(l) * sizeof(float);
        EXPECT_EQ(bytes, expectedBytes);
        std::vector<torch::Tensor> grads;
        for (auto& g : model.gradients()) grads.push_back(g.clone());
        results.push_back(grads);
        double norm2 = sums.squaredNorm(model);
        MPI_Allreduce(MPI_IN_PLACE, &norm2, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        squaredNorms.push_back(norm2);
    }
    // Every element is the sum of its two holders' values.
    std::size_t tensor = 0;
    double expectedNorm2 = 0.0;
    for (std::uint32_t k = 0; k < model.numLayers(); ++k) {
        const std::uint32_t l = first + k;
        const int peer = other >= 0 ? other : (l < 2 ? 0 : 1);
        for (auto& p : model.layer(k).parameters()) {
            const auto got = results[0][tensor].reshape({-1});
            for (std::int64_t i = 0; i < p.numel(); i += std::max<std::int64_t>(1, p.numel() / 50))
                ASSERT_FLOAT_EQ(got[i].item<float>(), gradientValue(rank, l, i) + gradientValue(peer, l, i))
                    << "layer " << l << " element " << i;
            EXPECT_TRUE(torch::equal(results[0][tensor], results[1][tensor])) << "layer " << l;
            ++tensor;
        }
    }
    EXPECT_EQ(tensor, results[0].size());
    // The whole model's norm, from sums computed here: rank 2 holds every layer.
    if (rank == 2)
        for (auto& g : results[0]) expectedNorm2 += g.to(torch::kFloat64).square().sum().item<double>();
    MPI_Allreduce(MPI_IN_PLACE, &expectedNorm2, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    // Each tensor's norm is taken in float32: agreement to float32 precision.
    EXPECT_NEAR(squaredNorms[0], expectedNorm2, 1e-6 * expectedNorm2);
    EXPECT_EQ(squaredNorms[0], squaredNorms[1]);
}

TEST(GradientSums, ATiedHeadAndTheEmbeddingSumAsOneParameter) {
    const int rank = worldRank();
    const auto layout = threeRanks();
    const std::uint32_t first = rank == 1 ? 2 : 0, end = rank == 0 ? 2 : 5;
    ModelConfig config = smallModel();
    config.tieEmbeddings = true;
    const std::uint32_t last = config.numLayers() - 1;
    Gpt model(config, first, end);
    for (const bool byLayer : {false, true}) {
        kiln::train::GradientSync sums(layout, MPI_COMM_WORLD, model, byLayer ? 600 : 64 << 20, mpi());
        setGradients(model, rank);
        sums.beginStep();
        if (byLayer)
            for (std::uint32_t l = end; l-- > first;) sums.layerReady(l);
        sums.finish(model, torch::kCPU);
        // The tied copies: what ranks 0 and 2 gave the embedding plus what ranks 1 and 2 gave the head.
        const auto tied = [&](std::int64_t i) {
            return gradientValue(0, 0, i) + gradientValue(2, 0, i) + gradientValue(1, last, i) + gradientValue(2, last, i);
        };
        for (std::uint32_t l = first; l < end; ++l) {
            const auto params = model.layer(l - first).parameters();
            for (std::size_t k = 0; k < params.size(); ++k) {
                const auto got = params[k].grad().reshape({-1});
                const bool copy = (l == 0 && k == ModelConfig::kTokenEmbedding) || config.isTiedHead(l, k);
                const int peer = rank != 2 ? 2 : (l < 2 ? 0 : 1);
                for (std::int64_t i = 0; i < got.numel(); i += std::max<std::int64_t>(1, got.numel() / 50))
                    ASSERT_FLOAT_EQ(got[i].item<float>(), copy ? tied(i) : gradientValue(rank, l, i) + gradientValue(peer, l, i))
                        << "layer " << l << " tensor " << k << " element " << i << (byLayer ? " (by layer)" : "");
            }
        }
        // Counted once: the whole model's norm on rank 2, less its copy of the head.
        double norm2 = sums.squaredNorm(model), expected = 0.0;
        if (rank == 2)
            for (std::uint32_t l = 0; l <= last; ++l) {
                const auto params = model.layer(l).parameters();
                for (std::size_t k = 0; k < params.size(); ++k)
                    if (!config.isTiedHead(l, k)) expected += params[k].grad().to(torch::kFloat64).square().sum().item<double>();
            }
        MPI_Allreduce(MPI_IN_PLACE, &norm2, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        MPI_Allreduce(MPI_IN_PLACE, &expected, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        EXPECT_NEAR(norm2, expected, 1e-6 * expected);
    }
}

TEST(GradientSums, BackwardLayerByLayerReportsFinalGradients) {
    if (worldRank() != 0) return;  // one rank runs a whole 1-stage pipeline alone
    const ModelConfig config = smallModel();
    const std::uint32_t layers = config.numLayers();
    kiln::plan::Layout layout;
    layout.layers = layers;
    layout.microBatch = 2;
    layout.globalBatch = 6;  // 3 microbatches
    kiln::plan::PipelinePlacement pipeline;
    pipeline.ranks = {0};
    pipeline.cuts = {0, layers};
    pipeline.microbatches = 3;
    layout.pipelines = {pipeline};
    kiln::plan::RankRole role;
    role.pipeline = 0;
    role.stages = 1;
    role.endLayer = layers;
    layout.roles = {role};
    layout.segments = {{0, layers, {0}}};

    kiln::data::Batch batch;
    batch.count = 6;
    batch.sampleLength = config.seqLen + 1;
    for (std::uint64_t i = 0; i < batch.count * batch.sampleLength; ++i)
        batch.tokens.push_back(static_cast<std::uint32_t>((i * 37 + 11) % config.vocabSize));

    auto transport = kiln::comm::makeMpiTransport(MPI_COMM_SELF);
    kiln::fault::FaultInjector injector({}, 0);
    Gpt model(config);
    kiln::train::PipelineStage stage(model, layout, 0, *transport, torch::kCPU, false, std::chrono::seconds(60));
    const double targets = 6.0 * config.seqLen;

    const auto whole = stage.run(batch, targets, injector, 0);
    std::vector<torch::Tensor> reference;
    for (auto& g : model.gradients()) reference.push_back(g.clone());
    ASSERT_EQ(reference.size(), model.parameters().size());

    for (auto& g : model.gradients()) g.zero_();
    std::vector<std::uint32_t> reported;
    std::vector<std::vector<torch::Tensor>> atReport(layers);
    const auto byLayer = stage.run(batch, targets, injector, 0, [&](std::uint32_t l) {
        reported.push_back(l);
        for (auto& p : model.layer(l).parameters()) atReport[l].push_back(p.grad().clone());
    });

    EXPECT_EQ(byLayer.lossSum, whole.lossSum);
    EXPECT_GT(whole.lossSum, 0.0);
    ASSERT_EQ(reported.size(), layers);
    for (std::uint32_t k = 0; k < layers; ++k) EXPECT_EQ(reported[k], layers - 1 - k) << "reported from the last layer";
    std::size_t tensor = 0;
    for (std::uint32_t l = 0; l < layers; ++l) {
        const auto params = model.layer(l).parameters();
        ASSERT_EQ(atReport[l].size(), params.size()) << "layer " << l;
        for (std::size_t k = 0; k < params.size(); ++k, ++tensor) {
            // Final when reported, and the same as one backward leaves, bit for bit.
            EXPECT_TRUE(torch::equal(atReport[l][k], params[k].grad())) << "layer " << l << " tensor " << k;
            EXPECT_TRUE(torch::equal(params[k].grad(), reference[tensor])) << "layer " << l << " tensor " << k;
        }
    }
    EXPECT_EQ(tensor, reference.size());
}
