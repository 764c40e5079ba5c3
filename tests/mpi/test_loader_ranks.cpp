// The loader on real ranks (5): the global batch assembled from 5 slices is
// the one a single rank reads whole; the cursor saved by 5 ranks in one
// collective write restores on 1, 2, 3 and 5 ranks and continues with the
// same batches; rows that disagree and cursors of another deck are refused.
// Ranks opening a corpus together share the work: one reads each manifest,
// each checks its share of the shards, a bad shard stops all with its name.
#include "kiln/base/error.hpp"
#include "kiln/data/batch_fingerprint.hpp"
#include "kiln/data/cursor_io.hpp"
#include "kiln/data/corpus.hpp"
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

// `docs` random documents in shards of `docsPerShard` (prep's names: an index.h5).
void makeSource(const std::string& name, std::size_t docs, unsigned seed, std::size_t docsPerShard = 1000000) {
    const fs::path dir = sharedDir() / name;
    fs::create_directories(dir);
    const TokenizerInfo tokenizer{"bytes-v1", 257, 256};
    SourceManifest manifest{name, tokenizer, 16, {}};
    std::mt19937 rng(seed);
    for (std::size_t first = 0; first < docs; first += docsPerShard) {
        ShardWriter writer(dir / shardFileName(manifest.shards.size()), ShardHeader{name, tokenizer, 16}, 256);
        for (std::size_t d = first; d < std::min(docs, first + docsPerShard); ++d) {
            std::vector<std::uint32_t> doc(1 + rng() % 90);
            for (auto& t : doc) t = rng() % 256;
            writer.addDocument(doc);
        }
        manifest.shards.push_back(writer.finish());
    }
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
            makeSource("many", 230, 3, 10);  // 23 shards
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

// Pass criterion: five ranks opening a corpus together each check a fifth of
// its shards (23 shards: 4 or 5 each, all checked once), every rank learns
// where all the small shards' chunks lie (from the rank that checked each) and
// streams them with preads, and the batches read through the shared corpus
// are the ones a rank opening it alone reads.
TEST_F(LoaderRanks, RanksDivideTheShardChecks) {
    LoaderSpec spec = testSpec();
    spec.sources = {{"x", sharedDir() / "x", 1.0}, {"many", sharedDir() / "many", 2.0}};
    const auto together = std::make_shared<Corpus>(spec, CorpusSharing{MPI_COMM_WORLD});
    EXPECT_EQ(together->shardsInAll(), 24u);
    EXPECT_GE(together->shardsChecked(), 4u);
    EXPECT_LE(together->shardsChecked(), 5u);
    std::uint64_t mine = together->shardsChecked(), all = 0;
    MPI_Allreduce(&mine, &all, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    EXPECT_EQ(all, 24u);
    EXPECT_EQ(together->reader(1).numDocuments(), 230u);
    EXPECT_FALSE(together->reader(1).manifest().shards.hasChecksums()) << "checked: the loader keeps no checksums";
    const auto& places = together->reader(1).shardChunks();
    ASSERT_EQ(places.size(), 23u);
    for (const auto& shard : places) EXPECT_TRUE(shard.known());
    const Corpus alone(spec);
    EXPECT_EQ(alone.shardsChecked(), 24u);

    DataLoader shared(spec, together, BatchPlanner(spec, *together).initial());
    DataLoader own(spec, BatchPlanner(spec, *together).initial());
    for (int step = 0; step < 5; ++step) {
        EXPECT_EQ(sliceFingerprint(shared.current()), sliceFingerprint(own.current())) << "step " << step;
        EXPECT_EQ(shared.current().tokens, own.current().tokens);
        shared.commit();
        own.commit();
    }
    // Lazily opened, through the bounded cache: never more open than data.open_shards.
    EXPECT_LE(together->reader(1).openShards(), spec.openShards);
    EXPECT_GT(together->reader(1).directReads(), 0u) << "small shards read with preads";
}

// Pass criterion: a truncated shard is found by the one rank that checks it,
// and every rank stops before the first step with the same message naming it.
TEST_F(LoaderRanks, ABadShardFoundByOneRankStopsAll) {
    const fs::path bad = sharedDir() / "many-bad";
    if (rankOf(MPI_COMM_WORLD) == 0) {
        fs::remove_all(bad);
        fs::copy(sharedDir() / "many", bad);
        const fs::path shard = bad / shardFileName(17);
        fs::resize_file(shard, fs::file_size(shard) / 2);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    LoaderSpec spec = testSpec();
    spec.sources = {{"many-bad", bad, 1.0}};
    const std::string error = errorOf([&] { Corpus corpus(spec, CorpusSharing{MPI_COMM_WORLD}); });
    EXPECT_NE(error.find((bad / shardFileName(17)).string()), std::string::npos) << error;
    EXPECT_NE(error.find("truncated"), std::string::npos) << error;
    // The same text on every rank: compare with rank 0's.
    int length = static_cast<int>(error.size());
    MPI_Bcast(&length, 1, MPI_INT, 0, MPI_COMM_WORLD);
    std::string first = error;
    first.resize(static_cast<std::size_t>(length));
    MPI_Bcast(first.data(), length, MPI_CHAR, 0, MPI_COMM_WORLD);
    EXPECT_EQ(error, first);
}

// Pass criterion: the manifest rank 0 broadcasts is, on every rank, the one
// it read (shard columns, tokenizer, names when they are not prep's).
TEST_F(LoaderRanks, ManifestBroadcastIsTheOneRead) {
    const SourceManifest read = readManifest(sharedDir() / "many");
    SourceManifest sent;
    if (rankOf(MPI_COMM_WORLD) == 0) sent = read;
    broadcastManifest(MPI_COMM_WORLD, 0, sent);
    EXPECT_EQ(sent.source, "many");
    EXPECT_EQ(sent.tokenizer.id, read.tokenizer.id);
    EXPECT_EQ(sent.tokenBits, read.tokenBits);
    ASSERT_EQ(sent.shards.size(), 23u);
    EXPECT_TRUE(sent.shards.namesImplied());
    for (std::size_t i = 0; i < read.shards.size(); ++i) {
        EXPECT_EQ(sent.shards[i].file, read.shards[i].file);
        EXPECT_EQ(sent.shards[i].numDocs, read.shards[i].numDocs);
        EXPECT_EQ(sent.shards[i].numTokens, read.shards[i].numTokens);
        EXPECT_EQ(sent.shards[i].tokensCrc, read.shards[i].tokensCrc);
        EXPECT_EQ(sent.shards[i].offsetsCrc, read.shards[i].offsetsCrc);
    }
    SourceManifest named;
    if (rankOf(MPI_COMM_WORLD) == 2) {
        named.source = "named";
        named.shards.push_back({"a.h5", 3, 30, 7, 8});
        named.shards.push_back({"b.h5", 4, 40, 9, 10});
    }
    broadcastManifest(MPI_COMM_WORLD, 2, named);
    ASSERT_EQ(named.shards.size(), 2u);
    EXPECT_EQ(named.shards.file(1), "b.h5");
    EXPECT_EQ(named.shards.numTokens(1), 40u);
    EXPECT_EQ(named.numDocs(), 7u);
}
