// The model: a block's gradients agree with finite differences in double
// precision, a layer's initial weights depend only on (seed, index), the
// vocabulary may be padded, a rank's cores go to one thread pool, the
// compute clock measures between its marks, and the host allocator counts,
// keeps and gives back tensors' and kernels' memory.
#include "kiln/model/compute_clock.hpp"
#include "kiln/model/cpu_allocations.hpp"
#include "kiln/model/gpt.hpp"
#include "kiln/model/profiler.hpp"
#include "kiln/arch/model_config.hpp"
#include "kiln/model/compute_threads.hpp"
#include "kiln/base/error.hpp"
#include "kiln/config/deck.hpp"
#include "layer_gradient_check.hpp"

#include <c10/core/Allocator.h>
#include <dlfcn.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

#include <gtest/gtest.h>

using namespace kiln::model;
using namespace kiln::arch;

namespace {

ModelConfig smallConfig() {
    ModelConfig c;
    c.vocabSize = 50;
    c.blocks = 3;
    c.dModel = 16;
    c.heads = 2;
    c.mlpRatio = 2;
    c.seqLen = 6;
    c.seed = 77;
    return c;
}

}  // namespace

// A step's sizes repeat: a freed tensor's pages serve the next request of
// its size, nothing more is taken from the system, and what a step no longer
// asks for goes back at the trim after it.
TEST(CpuAllocations, FreedBlocksServeTheSameSizeAndUnusedOnesGoBack) {
    countCpuAllocations();
    releaseCpuCache();
    const auto held0 = cpuHeldBytes(), live0 = cpuAllocatedBytes();
    constexpr std::int64_t kFloats = 1 << 20;  // 4 MiB: cached
    auto a = torch::full({kFloats}, 1.5f);
    const void* where = a.data_ptr();
    EXPECT_EQ(cpuAllocatedBytes() - live0, 4 * kFloats);
    EXPECT_EQ(cpuHeldBytes() - held0, 4 * kFloats);
    a = torch::Tensor();
    EXPECT_EQ(cpuAllocatedBytes(), live0);
    EXPECT_EQ(cpuHeldBytes() - held0, 4 * kFloats) << "kept for the next request of the size";
    EXPECT_EQ(cpuCachedFreeBytes(), 4 * kFloats);
    auto b = torch::zeros({kFloats});
    EXPECT_EQ(b.data_ptr(), where) << "the same pages again";
    EXPECT_EQ(b.sum().item<float>(), 0.0f);
    EXPECT_EQ(cpuHeldBytes() - held0, 4 * kFloats) << "nothing more from the system";
    auto other = torch::zeros({kFloats + 4096});  // another size: its own pages
    EXPECT_NE(other.data_ptr(), where);
    EXPECT_EQ(cpuHeldBytes() - held0, 4 * (2 * kFloats + 4096));
    other = torch::Tensor();
    trimCpuCache();  // end of a "step" in which the other size was taken: kept
    EXPECT_EQ(cpuCachedFreeBytes(), 4 * (kFloats + 4096));
    b = torch::Tensor();
    trimCpuCache();  // a step that took neither size: both go back
    EXPECT_EQ(cpuCachedFreeBytes(), 4 * kFloats) << "the one freed during this step is kept once more";
    trimCpuCache();
    EXPECT_EQ(cpuCachedFreeBytes(), 0);
    EXPECT_EQ(cpuHeldBytes(), held0);
    // Small tensors come from the C heap: counted, never kept.
    auto small = torch::ones({100});
    EXPECT_EQ(cpuAllocatedBytes() - live0, 400);
    small = torch::Tensor();
    EXPECT_EQ(cpuCachedFreeBytes(), 0);
    EXPECT_EQ(cpuHeldBytes(), held0);
    // Between steps, everything kept can go back at once.
    for (int k = 1; k <= 3; ++k) (void)torch::empty({kFloats * k});
    EXPECT_EQ(cpuCachedFreeBytes(), 4 * 6 * kFloats);
    releaseCpuCache();
    EXPECT_EQ(cpuCachedFreeBytes(), 0);
    EXPECT_EQ(cpuHeldBytes(), held0);
}

// libtorch's CPU kernels also take scratch memory through raw_allocate (a small bfloat16 matrix product does),
// which needs a DataPtr whose context is its data: counted and given back like a tensor's.
TEST(CpuAllocations, RawAllocationsAreCountedAndGivenBack) {
    countCpuAllocations();
    auto* allocator = c10::GetAllocator(c10::DeviceType::CPU);
    ASSERT_NE(allocator->raw_deleter(), nullptr);
    const auto live0 = cpuAllocatedBytes();
    for (std::size_t bytes : {std::size_t{100}, std::size_t{4} << 20}) {
        void* scratch = allocator->raw_allocate(bytes);
        EXPECT_EQ(cpuAllocatedBytes() - live0, static_cast<std::int64_t>(bytes));
        allocator->raw_deallocate(scratch);
        EXPECT_EQ(cpuAllocatedBytes(), live0);
    }
    const auto x = torch::randn({6, 16}).to(torch::kBFloat16), w = torch::randn({12, 16}).to(torch::kBFloat16);
    EXPECT_TRUE(torch::allclose(torch::linear(x, w).to(torch::kFloat32),
                                torch::linear(x.to(torch::kFloat32), w.to(torch::kFloat32)), 0.05, 0.05));
}

TEST(Model, BlockGradientMatchesFiniteDifferences) {
    torch::manual_seed(1);
    Layer block = buildLayer(smallConfig(), 1);
    EXPECT_GT(checkLayerGradients(block, 16), 80);
}

TEST(Model, LayerWeightsDependOnlyOnSeedAndIndex) {
    const auto config = smallConfig();
    Gpt whole(config);
    torch::manual_seed(12345);  // whatever the global state before
    Gpt stage(config, 2, 4);    // layers 2 and 3 alone, as a pipeline stage builds them
    for (std::uint32_t l = 0; l < 2; ++l) {
        const auto a = whole.layer(2 + l).parameters(), b = stage.layer(l).parameters();
        ASSERT_EQ(a.size(), b.size());
        for (std::size_t k = 0; k < a.size(); ++k) EXPECT_TRUE(torch::equal(a[k], b[k])) << "layer " << 2 + l;
    }
    auto other = config;
    other.seed = 78;
    EXPECT_FALSE(torch::equal(Gpt(other, 1, 2).layer(0).parameters()[2], whole.layer(1).parameters()[2]));
    EXPECT_FALSE(torch::equal(whole.layer(1).parameters()[2], whole.layer(2).parameters()[2]));
}

TEST(Model, ParameterCountMatchesTheLayers) {
    const auto config = smallConfig();
    Gpt model(config);
    std::int64_t n = 0;
    for (auto& p : model.parameters()) n += p.numel();
    EXPECT_EQ(static_cast<std::uint64_t>(n), config.parameters());
    const auto logits = model.forward(torch::randint(0, 50, {3, 6}, torch::kInt64));
    EXPECT_EQ(logits.sizes().vec(), (std::vector<std::int64_t>{3, 6, 50}));
}

TEST(Model, QuickProfileMeasuresEachKindOnce) {
    auto config = smallConfig();
    config.blocks = 5;
    const auto full = profileModel(config, 2, 1, 1);
    const auto quick = profileModel(config, 2, 1, 1, torch::Device(torch::kCPU), false, /*eachKindOnce=*/true);
    ASSERT_EQ(quick.layers.size(), config.numLayers());
    for (std::uint32_t i = 0; i < config.numLayers(); ++i) {
        EXPECT_EQ(quick.layers[i].kind, full.layers[i].kind) << i;
        EXPECT_EQ(quick.layers[i].paramBytes, full.layers[i].paramBytes) << i;
        EXPECT_EQ(quick.layers[i].outputBytes, full.layers[i].outputBytes) << i;
        EXPECT_EQ(quick.layers[i].activationBytes, full.layers[i].activationBytes) << i;
        EXPECT_GT(quick.layers[i].forwardSeconds, 0.0) << i;
        // Blocks after the first take its times: one measurement stands for all.
        if (i > 1 && i + 1 < config.numLayers()) {
            EXPECT_EQ(quick.layers[i].forwardSeconds, quick.layers[1].forwardSeconds) << i;
            EXPECT_EQ(quick.layers[i].backwardSeconds, quick.layers[1].backwardSeconds) << i;
        }
    }
}

TEST(Model, ProfileMeasuresEveryLayerAndRoundTrips) {
    const auto config = smallConfig();
    const auto profile = profileModel(config, 2, 2, 1);
    ASSERT_EQ(profile.layers.size(), config.numLayers());
    EXPECT_EQ(profile.layers[0].kind, "embedding");
    EXPECT_EQ(profile.layers[1].kind, "block");
    EXPECT_EQ(profile.layers.back().kind, "output");
    for (std::uint32_t i = 0; i < config.numLayers(); ++i) {
        EXPECT_GT(profile.layers[i].forwardSeconds, 0.0);
        EXPECT_GT(profile.layers[i].backwardSeconds, 0.0);
        EXPECT_EQ(profile.layers[i].paramBytes, 4 * config.parametersOf(i));
    }
    EXPECT_EQ(profile.layers[1].outputBytes, 4u * 2 * 6 * 16);
    const std::string path = "/tmp/kiln-profile-test-" + std::to_string(::getpid()) + ".h5";
    kiln::plan::writeProfile(path, profile);
    const auto back = kiln::plan::readProfile(path);
    ASSERT_EQ(back.layers.size(), profile.layers.size());
    EXPECT_EQ(back.layers[2].forwardSeconds, profile.layers[2].forwardSeconds);
    EXPECT_EQ(back.layers[3].activationBytes, profile.layers[3].activationBytes);
    EXPECT_EQ(back.model.dModel, 16u);
    EXPECT_EQ(back.microBatch, 2u);
    std::remove(path.c_str());
}

TEST(Model, ParameterShapesMatchTheLayers) {
    // Checkpoints create every layer's datasets from ModelConfig::parameterShapes on
    // ranks that do not build the layer: the two must never drift apart.
    const auto config = smallConfig();
    for (std::uint32_t i = 0; i < config.numLayers(); ++i) {
        const auto shapes = config.parameterShapes(i);
        const auto named = buildLayer(config, i)->named_parameters();
        ASSERT_EQ(shapes.size(), named.size()) << "layer " << i;
        std::uint64_t count = 0;
        for (std::size_t k = 0; k < named.size(); ++k) {
            EXPECT_EQ(shapes[k].first, named[k].key()) << "layer " << i;
            EXPECT_EQ(shapes[k].second, named[k].value().sizes().vec()) << "layer " << i << " " << named[k].key();
            count += static_cast<std::uint64_t>(named[k].value().numel());
        }
        EXPECT_EQ(count, config.parametersOf(i)) << "layer " << i;
    }
}

TEST(Model, VocabularyMayBePaddedAboveTheTokenizersNeverBelow) {
    const auto deckWith = [](const char* vocab) {
        return kiln::config::Deck::fromText(std::string("[model]\nvocab = ") + vocab + "\n", "v.ini");
    };
    EXPECT_EQ(modelConfigFromDeck(deckWith("0"), 50257).vocabSize, 50257u);
    EXPECT_EQ(modelConfigFromDeck(deckWith("50304"), 50257).vocabSize, 50304u);  // padded to a multiple of 64
    try {
        modelConfigFromDeck(deckWith("50000"), 50257);
        FAIL() << "a vocabulary below the tokenizer's was accepted";
    } catch (const kiln::InputError& e) {
        EXPECT_NE(std::string(e.what()).find("v.ini:2"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("at least 50257"), std::string::npos) << e.what();
    }
}

TEST(ComputeThreads, ARanksCoresGoToOnePool) {
    const auto t = useComputeThreads(3, 1);
    EXPECT_EQ(t.cores, 3);
    const bool openBlas = dlsym(RTLD_DEFAULT, "openblas_set_num_threads") != nullptr;
#if TORCH_VERSION_MAJOR < 2
    // Debian's libtorch calls the system BLAS, which bootstrap.sh makes OpenBLAS.
    EXPECT_TRUE(openBlas) << "libtorch 1.13 runs without OpenBLAS here: ~6x slower";
#endif
    if (openBlas) {
        EXPECT_EQ(t.blasThreads, 3);
        EXPECT_EQ(t.torchThreads, 1);
    } else {
        EXPECT_EQ(t.blasThreads, 0);
        EXPECT_EQ(t.torchThreads, 3);
    }
    EXPECT_EQ(torch::get_num_threads(), t.torchThreads);
}

TEST(ComputeThreads, TheDefaultSharesTheHostAmongItsRanks) {
    cpu_set_t mask;
    ASSERT_EQ(sched_getaffinity(0, sizeof(mask), &mask), 0);
    const int allowed = CPU_COUNT(&mask), host = static_cast<int>(std::thread::hardware_concurrency());
    const auto t = useComputeThreads(0, 2);
    // Bound to fewer CPUs than the host has: the binding is the share; else half the host, at least 1.
    EXPECT_EQ(t.cores, allowed < host ? allowed : std::max(1, host / 2));
    EXPECT_EQ(useComputeThreads(0, 10 * host).cores, allowed < host ? allowed : 1);
}

TEST(ComputeClock, MarksMeasureWhatRanBetweenThemAndAreReusedAfterAReset) {
    kiln::model::ComputeClock clock(torch::kCPU, std::chrono::seconds(1));
    const auto a = clock.mark();
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    const auto b = clock.mark();
    const auto c = clock.mark();
    EXPECT_GE(clock.seconds(a, b), 0.029);
    EXPECT_LT(clock.seconds(b, c), clock.seconds(a, b));
    EXPECT_NEAR(clock.seconds(a, c), clock.seconds(a, b) + clock.seconds(b, c), 1e-9);
    clock.reset();
    EXPECT_EQ(clock.mark(), a);  // marks count from the start again
    EXPECT_THROW(clock.seconds(a, b), std::out_of_range);  // b belonged to the last step
    kiln::model::waitForDevice(torch::Device(torch::kCPU), std::chrono::milliseconds(1));  // nothing queued on a CPU
}
