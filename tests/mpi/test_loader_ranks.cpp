// The loader on real ranks (5): the global batch assembled from 5 slices is
// the one a single rank reads whole; the cursor saved by 5 ranks in one
// collective write restores on 1, 2, 3 and 5 ranks and continues with the
// same batches; rows that disagree and cursors of another deck are refused.
#include "kiln/base/error.hpp"
#include "kiln/data/batch_fingerprint.hpp"
#include "kiln/data/cursor_io.hpp"
#include "kiln/data/loader.hpp"
#include "kiln/data/shard_writer.hpp"
#include "kiln/data/source_manifest.hpp"

#include "../support/error_text.hpp"
#include "../support/shared_dir.hpp"

#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <filesystem>
#include <random>

namespace fs = std::filesystem;
using namespace kiln::data;

using kiln::test::errorOf;

namespace {

int rankOf(MPI_Comm comm) {
    int r = 0;
    MPI_Comm_rank(comm, &r);
    return r;
}
int sizeOf(MPI_Comm comm) {
    int n = 0;
    MPI_Comm_size(comm, &n);
    return n;
}

fs::path sharedDir() {
    static const fs::path dir = kiln::test::sharedScratch("kiln-loader-mpi");
    return dir;
}

void makeSource(const std::string& name, std::size_t docs, unsigned seed) {
    const fs::path dir = sharedDir() / name;
    fs::create_directories(dir);
    const TokenizerInfo tokenizer{"bytes-v1", 257, 256};
    SourceManifest manifest{name, tokenizer, 16, {}};
    ShardWriter writer(dir / "shard-00000.h5", ShardHeader{name, tokenizer, 16});
    std::mt19937 rng(seed);
    for (std::size_t d = 0; d < docs; ++d) {
        std::vector<std::uint32_t> doc(1 + rng() % 90);
        for (auto& t : doc) t = rng() % 256;
        writer.addDocument(doc);
    }
    manifest.shards.push_back(writer.finish());
    writeManifest(dir, manifest);
}

LoaderSpec testSpec() {
    LoaderSpec s;
    s.sources = {{"x", sharedDir() / "x", 3.0}, {"y", sharedDir() / "y", 1.0}};
    s.seqLen = 32;
    s.globalBatch = 13;  // not a multiple of any rank count used
    s.blockDocs = 8;
    s.windowBlocks = 4;
    return s;
}

// Fingerprints of `steps` global batches read on `comm`, each rank its slice.
std::vector<std::uint64_t> fingerprints(MPI_Comm comm, const Cursor& start, int steps, Cursor* end = nullptr) {
    const auto spec = testSpec();
    DataLoader loader(spec, start);
    const std::uint64_t n = sizeOf(comm), r = rankOf(comm);
    loader.setSlice(spec.globalBatch * r / n, spec.globalBatch * (r + 1) / n - spec.globalBatch * r / n);
    std::vector<std::uint64_t> out;
    for (int s = 0; s < steps; ++s) {
        std::uint64_t part = sliceFingerprint(loader.current()), sum = 0;
        MPI_Allreduce(&part, &sum, 1, MPI_UINT64_T, MPI_SUM, comm);
        out.push_back(sum);
        loader.commit();
    }
    if (end) *end = loader.cursor();
    return out;
}

Cursor initialCursor() {
    const auto spec = testSpec();
    Corpus corpus(spec);
    return BatchPlanner(spec, corpus).initial();
}

class LoaderRanks : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        if (rankOf(MPI_COMM_WORLD) == 0) {
            fs::remove_all(sharedDir());
            makeSource("x", 300, 1);
            makeSource("y", 120, 2);
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
};

}  // namespace

TEST_F(LoaderRanks, SlicesOnFiveRanksMakeTheSingleRankBatch) {
    ASSERT_EQ(sizeOf(MPI_COMM_WORLD), 5);
    const auto together = fingerprints(MPI_COMM_WORLD, initialCursor(), 9);
    MPI_Comm self;
    MPI_Comm_split(MPI_COMM_WORLD, rankOf(MPI_COMM_WORLD), 0, &self);
    const auto alone = fingerprints(self, initialCursor(), 9);
    MPI_Comm_free(&self);
    EXPECT_EQ(together, alone);
}

TEST_F(LoaderRanks, CursorSavedByFiveRestoresOnOneTwoThreeAndFive) {
    Cursor saved;
    fingerprints(MPI_COMM_WORLD, initialCursor(), 17, &saved);
    const auto spec = testSpec();
    const auto context = cursorContext(spec, "bytes-v1");
    const std::string path = (sharedDir() / "cursor.h5").string();
    saveCursorFile(MPI_COMM_WORLD, path, saved, context);

    // The reference continuation, on each rank alone.
    MPI_Comm self;
    MPI_Comm_split(MPI_COMM_WORLD, rankOf(MPI_COMM_WORLD), 0, &self);
    const auto reference = fingerprints(self, saved, 6);
    MPI_Comm_free(&self);

    for (int ranks : {1, 2, 3, 5}) {
        MPI_Comm sub;
        MPI_Comm_split(MPI_COMM_WORLD, rankOf(MPI_COMM_WORLD) < ranks ? 0 : MPI_UNDEFINED, 0, &sub);
        if (sub != MPI_COMM_NULL) {
            const Cursor restored = loadCursorFile(sub, path, context);
            EXPECT_EQ(restored, saved) << ranks << " ranks";
            EXPECT_EQ(fingerprints(sub, restored, 6), reference) << ranks << " ranks";
            MPI_Comm_free(&sub);
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
}

TEST_F(LoaderRanks, DisagreeingRowsAndOtherDecksAreRefused) {
    const auto spec = testSpec();
    const auto context = cursorContext(spec, "bytes-v1");
    Cursor c = initialCursor();
    if (rankOf(MPI_COMM_WORLD) == 3) c.sources[0].docPos = 7;  // a rank out of step
    const std::string bad = (sharedDir() / "disagree.h5").string();
    saveCursorFile(MPI_COMM_WORLD, bad, c, context);
    EXPECT_NE(errorOf([&] { loadCursorFile(MPI_COMM_WORLD, bad, context); }).find("rows of rank 0 and rank 3 disagree"),
              std::string::npos);

    const std::string good = (sharedDir() / "good.h5").string();
    saveCursorFile(MPI_COMM_WORLD, good, initialCursor(), context);
    auto otherSeqLen = context;
    otherSeqLen.seqLen = 64;
    const std::string e1 = errorOf([&] { loadCursorFile(MPI_COMM_WORLD, good, otherSeqLen); });
    EXPECT_NE(e1.find("saved with data.seq_len = 32, but this run has data.seq_len = 64"), std::string::npos) << e1;
    auto otherTokenizer = context;
    otherTokenizer.tokenizerId = "sentencepiece-0badf00d";
    const std::string e2 = errorOf([&] { loadCursorFile(MPI_COMM_WORLD, good, otherTokenizer); });
    EXPECT_NE(e2.find("saved with the tokenizer = bytes-v1"), std::string::npos) << e2;
    const std::string e3 = errorOf([&] { loadCursorFile(MPI_COMM_WORLD, (sharedDir() / "none.h5").string(), context); });
    EXPECT_NE(e3.find("none.h5: no such file"), std::string::npos) << e3;
}
