// Training end to end on a real corpus (the licence texts every Debian
// machine ships, byte-tokenized): the loss falls; N steps straight equal N/2
// steps, a restore and N/2 steps, bit for bit; one global batch as 1, 2 or 4
// microbatches gives the same gradient; a damaged checkpoint is refused with
// a clear error while `latest` keeps naming a good one.
#include "kiln/config/deck.hpp"
#include "kiln/data/prep.hpp"
#include "kiln/io/diag_file.hpp"
#include "kiln/io/hdf5.hpp"
#include "kiln/io/parallel_file.hpp"
#include "kiln/arch/model_config.hpp"
#include "kiln/train/trainer.hpp"
#include "../support/error_text.hpp"
#include "../support/shared_dir.hpp"

#include <gtest/gtest.h>
#include <mpi.h>
#include <torch/torch.h>

#include <cmath>
#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;
using kiln::test::errorOf;

namespace {

fs::path work() {
    static const fs::path dir = kiln::test::sharedScratch("kiln-train");
    return dir;
}

kiln::config::Deck deck(const std::string& name, std::vector<std::string> extra = {}) {
    std::vector<std::string> overrides = {"run.name=" + name, "run.out_dir=" + (work() / "runs").string(),
                                          "data.dir=" + (work() / "data").string(), "data.mix=licenses:1",
                                          "data.tokenizer=bytes", "data.seq_len=32", "data.global_batch=8",
                                          "model.blocks=2", "model.d_model=32", "model.heads=2", "train.micro_batch=4",
                                          "train.threads=1", "train.warmup_steps=2", "run.steps=8"};
    overrides.insert(overrides.end(), extra.begin(), extra.end());
    return kiln::config::Deck::defaults(overrides);
}

kiln::train::TrainSummary train(const kiln::config::Deck& d, std::uint64_t until = ~0ull) {
    kiln::comm::World world(0);
    kiln::train::Trainer trainer(d, world);
    return trainer.run(until);
}

// Every dataset under /layers of a checkpoint of the test model (4 layers),
// flattened in name order. Every HDF5 call is checked and the values must
// number the model's parameters: two empty lists can never compare equal here.
std::vector<float> tensorsOf(const fs::path& checkpoint, const std::string& kind) {
    namespace h5 = kiln::io::h5;
    const std::string where = checkpoint.string();
    auto file = kiln::io::openForReading(where, "checkpoint");
    std::vector<float> all;
    for (int l = 0; l < 4; ++l) {
        const std::string group = "/layers/0000" + std::to_string(l) + "/" + kind;
        h5::Handle g(KILN_H5(H5Gopen2(file, group.c_str(), H5P_DEFAULT), where));
        H5G_info_t info;
        KILN_H5(H5Gget_info(g, &info), where);
        for (hsize_t i = 0; i < info.nlinks; ++i) {
            char name[128];
            KILN_H5(H5Lget_name_by_idx(g, ".", H5_INDEX_NAME, H5_ITER_INC, i, name, sizeof(name), H5P_DEFAULT), where);
            h5::Handle set(KILN_H5(H5Dopen2(g, name, H5P_DEFAULT), where));
            h5::Handle space(KILN_H5(H5Dget_space(set), where));
            std::vector<float> values(static_cast<std::size_t>(KILN_H5(H5Sget_simple_extent_npoints(space), where)));
            KILN_H5(H5Dread(set, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()), where);
            all.insert(all.end(), values.begin(), values.end());
        }
    }
    kiln::arch::ModelConfig model;  // the test deck's: 2 blocks, d_model 32, byte vocabulary
    model.vocabSize = 257;
    model.blocks = 2;
    model.dModel = 32;
    model.heads = 2;
    model.seqLen = 32;
    EXPECT_EQ(all.size(), model.parameters()) << where << " " << kind;
    return all;
}

class Training : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        kiln::data::PrepOptions o;
        o.source = "licenses";
        o.outDir = (work() / "data").string();
        o.inputs = {"/usr/share/common-licenses"};
        o.overwrite = true;
        o.progress = false;
        kiln::data::prepareSource(MPI_COMM_WORLD, o);
    }
};

}  // namespace

TEST_F(Training, LossFalls) {
    const auto s = train(deck("falls", {"run.steps=40", "train.lr=0.01"}));
    EXPECT_NEAR(s.firstLoss, std::log(257.0), 0.3) << "a fresh model is close to uniform over the 257 byte ids";
    EXPECT_LT(s.lastLoss, s.firstLoss - 1.5) << "first " << s.firstLoss << " last " << s.lastLoss;
    EXPECT_EQ(s.lastStep, 40u);
}

TEST_F(Training, RestoreIsBitForBit) {
    train(deck("straight"));
    train(deck("halves"), 4);
    train(deck("halves"));  // resumes from step 4
    const auto a = work() / "runs/straight/ckpt/step-00000008.h5", b = work() / "runs/halves/ckpt/step-00000008.h5";
    EXPECT_EQ(tensorsOf(a, "params"), tensorsOf(b, "params"));
    EXPECT_EQ(tensorsOf(a, "adam_v"), tensorsOf(b, "adam_v"));
    // The diagnostics agree step by step too (the resumed run appends to its diag.h5).
    auto fa = kiln::io::openDiagForReading((work() / "runs/straight/diag.h5").string());
    auto fb = kiln::io::openDiagForReading((work() / "runs/halves/diag.h5").string());
    const auto sa = kiln::io::DiagFile::readSteps(fa), sb = kiln::io::DiagFile::readSteps(fb);
    ASSERT_EQ(sa.size(), 8u);
    ASSERT_EQ(sb.size(), 8u);
    for (std::size_t i = 0; i < 8; ++i) {
        EXPECT_EQ(sa[i].step, sb[i].step);
        EXPECT_EQ(sa[i].loss, sb[i].loss) << "step " << i;
    }
    const auto events = kiln::io::DiagFile::readEvents(fb);
    EXPECT_TRUE(std::any_of(events.begin(), events.end(), [](const auto& e) { return std::string(e.kind) == "resume"; }));
}

TEST_F(Training, MicrobatchesDoNotChangeTheGradient) {
    std::vector<std::vector<float>> moments;
    for (const char* micro : {"1", "2", "4"}) {
        const std::string name = std::string("micro") + micro;
        train(deck(name, {std::string("train.micro_batch=") + micro, "run.steps=1", "train.grad_clip=0"}));
        // After one step the first moment is (1 - beta1) * gradient.
        moments.push_back(tensorsOf(work() / "runs" / name / "ckpt/step-00000001.h5", "adam_m"));
    }
    for (std::size_t k = 1; k < moments.size(); ++k) {
        double diff = 0, norm = 0;
        for (std::size_t i = 0; i < moments[0].size(); ++i) {
            diff += std::pow(double(moments[k][i]) - moments[0][i], 2);
            norm += std::pow(double(moments[0][i]), 2);
        }
        EXPECT_LT(std::sqrt(diff / norm), 1e-6) << "micro_batch " << (k == 1 ? 2 : 4) << " against 1";
    }
}

TEST_F(Training, DamagedCheckpointFallsBackOrIsRefused) {
    train(deck("damaged", {"checkpoint.every=2", "run.steps=4"}));
    const fs::path ckpt = work() / "runs/damaged/ckpt";
    // A write that crashed midway leaves only a temporary, which nothing reads.
    std::ofstream(ckpt / ".step-00000006.h5.tmp.999") << "half a file";
    const auto resumed = train(deck("damaged", {"run.steps=5"}));
    EXPECT_EQ(resumed.firstStep, 4u);
    // Now damage the checkpoint `latest` names: the resume falls back to the one before it.
    fs::resize_file(ckpt / "step-00000005.h5", fs::file_size(ckpt / "step-00000005.h5") / 3);
    const auto fellBack = train(deck("damaged", {"run.steps=6"}));
    EXPECT_EQ(fellBack.firstStep, 4u);
    EXPECT_EQ(fellBack.lastStep, 6u);
    // Named explicitly, it is the only one tried: refused, naming the file and the others.
    const std::string error =
        errorOf([&] { train(deck("damaged", {"run.steps=7", "checkpoint.from=" + (ckpt / "step-00000005.h5").string()})); });
    EXPECT_NE(error.find("step-00000005.h5: cannot be read: the file is truncated"), std::string::npos) << error;
    EXPECT_NE(error.find("step-00000004.h5"), std::string::npos) << error;
    EXPECT_NE(error.find("--set checkpoint.from=FILE"), std::string::npos) << error;
    // And the way out works.
    const auto again = train(deck("damaged", {"run.steps=6", "checkpoint.from=" + (ckpt / "step-00000004.h5").string()}));
    EXPECT_EQ(again.firstStep, 4u);
    EXPECT_EQ(again.lastStep, 6u);
}

TEST_F(Training, Bf16AutocastTrainsLikeFp32) {
    const auto fp32 = train(deck("fp32", {"run.steps=12", "train.lr=0.01"}));
    const auto bf16 = train(deck("bf16", {"run.steps=12", "train.lr=0.01", "train.precision=bf16"}));
    EXPECT_NEAR(bf16.firstLoss, fp32.firstLoss, 0.02 * fp32.firstLoss);
    EXPECT_LT(bf16.lastLoss, bf16.firstLoss - 0.5);
    EXPECT_NEAR(bf16.lastLoss, fp32.lastLoss, 0.1 * fp32.lastLoss);
    EXPECT_NE(bf16.lastLoss, fp32.lastLoss) << "bf16 autocast did not change the arithmetic";
}

// train.device = cuda: trains where libtorch sees a GPU, and is a clear error where it does not.
TEST_F(Training, CudaTrainsOrIsAClearError) {
    if (torch::cuda::is_available()) {
        const auto s = train(deck("cuda", {"train.device=cuda", "run.steps=2"}));
        EXPECT_EQ(s.lastStep, 2u);
        EXPECT_TRUE(std::isfinite(s.lastLoss));
        return;
    }
    const std::string error = errorOf([&] { train(deck("cuda", {"train.device=cuda"})); });
    EXPECT_NE(error.find("train.device = cuda, but libtorch sees no CUDA device"), std::string::npos) << error;
}

TEST_F(Training, AnotherModelShapeIsRefusedByName) {
    train(deck("shape", {"run.steps=1"}));
    const std::string error = errorOf([&] { train(deck("shape", {"run.steps=2", "model.d_model=48"})); });
    EXPECT_NE(error.find("model.d_model is 32 in the checkpoint but 48 in this run"), std::string::npos) << error;
}

// Raising run.steps on a resume keeps the cosine horizon of the first start:
// the steps already planned get the learning rates they would have had, the
// added ones train.min_lr; setting train.decay_steps changes it on purpose.
TEST_F(Training, RaisingRunStepsKeepsTheLearningRateSchedule) {
    train(deck("horizon-ref", {"run.steps=8"}));
    train(deck("horizon", {"run.steps=8"}), 4);
    train(deck("horizon", {"run.steps=12"}));
    auto ref = kiln::io::openDiagForReading((work() / "runs/horizon-ref/diag.h5").string());
    auto run = kiln::io::openDiagForReading((work() / "runs/horizon/diag.h5").string());
    const auto a = kiln::io::DiagFile::readSteps(ref), b = kiln::io::DiagFile::readSteps(run);
    ASSERT_EQ(a.size(), 8u);
    ASSERT_EQ(b.size(), 12u);
    for (std::size_t i = 0; i < 8; ++i) EXPECT_DOUBLE_EQ(a[i].lr, b[i].lr) << "step " << i;
    for (std::size_t i = 8; i < 12; ++i) EXPECT_DOUBLE_EQ(b[i].lr, 0.0003) << "step " << i << " (train.min_lr)";
    EXPECT_GT(a[4].lr, a[7].lr) << "the reference decays";
}
