// The run's checkpoints as one object (issue 52): taken now or in the background as the deck says, reported
// once written, and their fault injection points reached from the background writer's thread, also when the
// caller has let its injector go (the object holds it, and is destroyed with a write pending without touching
// a destroyed one). One rank, a tiny model, a scratch directory.
#include "../../src/train/run_checkpoints.hpp"

#include "kiln/model/gpt.hpp"
#include "kiln/train/adamw.hpp"
#include "kiln/train/train_config.hpp"

#include <gtest/gtest.h>
#include <mpi.h>
#include <torch/torch.h>

#include <cstdlib>
#include <filesystem>
#include <vector>

using namespace kiln;
using train::CheckpointWrite;
using train::RunCheckpoints;

namespace {

arch::ModelConfig tinyModel() {
    arch::ModelConfig c;
    c.vocabSize = 61;
    c.blocks = 2;
    c.dModel = 16;
    c.heads = 2;
    c.seqLen = 8;
    return c;
}

struct TinyRun {
    model::Gpt model{tinyModel()};
    train::AdamW optimizer{model, train::TrainConfig{}};
    std::filesystem::path dir;
    std::vector<std::pair<std::uint64_t, bool>> written;  // (step, background) as reported

    TinyRun() {
        char name[] = "/tmp/kiln-run-checkpoints.XXXXXX";
        dir = mkdtemp(name);
    }
    ~TinyRun() { std::filesystem::remove_all(dir); }

    train::LayerHolders holders() const {
        return train::LayerHolders(model.config().numLayers(), std::vector<std::vector<int>>{{0}});
    }
    std::unique_ptr<RunCheckpoints> checkpoints(bool background) {
        return std::make_unique<RunCheckpoints>(
            dir / "ckpt", 2, background, /*parallel=*/true,
            [this](train::LayerHolders holders) {
                return train::CheckpointManager::Source{&model, &optimizer, std::move(holders), data::Cursor{},
                                                        data::CursorContext{}, "", 0};
            },
            [this](const CheckpointWrite& done, bool background) { written.push_back({done.step, background}); });
    }
};

}  // namespace

TEST(RunCheckpoints, WrittenNowWhenTheDeckSaysSo) {
    TinyRun run;
    auto checkpoints = run.checkpoints(/*background=*/false);
    checkpoints->start(MPI_COMM_WORLD, 3, run.holders());
    EXPECT_FALSE(checkpoints->pending());
    ASSERT_EQ(run.written.size(), 1u);
    EXPECT_EQ(run.written[0], std::make_pair(std::uint64_t{3}, false));
    const auto latest = checkpoints->store().latest();
    ASSERT_TRUE(latest.has_value());
    EXPECT_EQ(latest->filename(), "step-00000003.h5");
}

TEST(RunCheckpoints, InTheBackgroundReportedWhenPublished) {
    TinyRun run;
    auto checkpoints = run.checkpoints(/*background=*/true);
    checkpoints->start(MPI_COMM_WORLD, 4, run.holders());
    EXPECT_TRUE(checkpoints->pending());
    EXPECT_TRUE(run.written.empty()) << "reported before it was published";
    checkpoints->complete(MPI_COMM_WORLD);
    ASSERT_EQ(run.written.size(), 1u);
    EXPECT_EQ(run.written[0], std::make_pair(std::uint64_t{4}, true));
    // The next one now publishes the pending one first.
    checkpoints->start(MPI_COMM_WORLD, 6, run.holders());
    checkpoints->write(MPI_COMM_WORLD, 7, run.holders());
    ASSERT_EQ(run.written.size(), 3u);
    EXPECT_EQ(run.written[1], std::make_pair(std::uint64_t{6}, true));
    EXPECT_EQ(run.written[2], std::make_pair(std::uint64_t{7}, false));
}

TEST(RunCheckpoints, TheWritersThreadReachesTheInjectorItHolds) {
    TinyRun run;
    std::vector<fault::Injection> items;
    ASSERT_EQ(fault::parseInjections("0:8:write:throw", items), "");  // the checkpoint of step 9 follows step 8
    auto injector = std::make_shared<fault::FaultInjector>(items, 0);
    const std::weak_ptr<fault::FaultInjector> watch = injector;
    auto checkpoints = run.checkpoints(/*background=*/true);
    checkpoints->arm(injector);
    injector.reset();  // the caller lets go: the checkpoints hold it
    ASSERT_FALSE(watch.expired());
    checkpoints->start(MPI_COMM_WORLD, 9, run.holders());
    checkpoints->complete(MPI_COMM_WORLD);
    EXPECT_TRUE(run.written.empty()) << "the injected failure in the writer's thread did not drop the checkpoint";
    EXPECT_FALSE(checkpoints->store().latest().has_value());
    // Destroyed with a background write pending: its thread still finds the injector.
    checkpoints->start(MPI_COMM_WORLD, 10, run.holders());
    checkpoints.reset();
    EXPECT_TRUE(watch.expired());
}

TEST(RunCheckpoints, DescribesAWrite) {
    CheckpointWrite now;
    now.stall = 0.25;
    now.writers = 3;
    EXPECT_EQ(RunCheckpoints::describe(now, false), "in 0.25 s, 3 writers");
    CheckpointWrite background;
    background.stall = 0.004;
    background.bytes = 12'500'000;
    background.write = 0.5;
    EXPECT_EQ(RunCheckpoints::describe(background, true),
              "in the background: training stalled 0.004 s, this rank wrote 12.5 MB in 0.500 s");
}
