// The loader end to end on small sources whose documents carry unique
// markers (every token of document d of a source is d + 1; EOS is 0).
//
// Exactly-once: over several epochs, with the cursor saved and restored at
// arbitrary steps, sliced as 1, 2, 3 or 5 ranks would slice it, and with a
// weight change and a new source in the middle, every document of every
// completed epoch is a training target exactly once, except the epoch's
// dropped tail, which the cursor counts.
#include "kiln/base/error.hpp"
#include "kiln/data/batch_planner.hpp"
#include "kiln/data/doc_lengths.hpp"
#include "kiln/data/loader.hpp"
#include "kiln/data/shard_writer.hpp"
#include "kiln/data/source_manifest.hpp"

#include "../support/scratch_dir.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <random>
#include <set>

namespace fs = std::filesystem;
using namespace kiln::data;

namespace {

const fs::path& dataDir() {
    static const fs::path dir = kiln::test::processScratch("kiln-loader");
    return dir;
}

// Source `name` with documents of random lengths 1..maxLength, written in shards of ~`shardTokens` tokens.
std::vector<std::uint64_t> makeSource(const std::string& name, std::size_t docs, std::uint64_t maxLength, unsigned seed,
                                      std::uint64_t shardTokens = 200) {
    const fs::path dir = dataDir() / name;
    fs::remove_all(dir);
    fs::create_directories(dir);
    const TokenizerInfo tokenizer{"marker-tokenizer", 60000, 0};
    SourceManifest manifest{name, tokenizer, 16, {}};
    std::mt19937 rng(seed);
    std::vector<std::uint64_t> lengths;
    std::unique_ptr<ShardWriter> writer;
    for (std::size_t d = 0; d < docs; ++d) {
        if (!writer)
            writer = std::make_unique<ShardWriter>(dir / ("shard-" + std::to_string(manifest.shards.size()) + ".h5"),
                                                   ShardHeader{name, tokenizer, 16});
        lengths.push_back(1 + rng() % maxLength);
        writer->addDocument(std::vector<std::uint32_t>(lengths.back(), static_cast<std::uint32_t>(d + 1)));
        if (writer->numTokens() > shardTokens) {
            manifest.shards.push_back(writer->finish());
            writer.reset();
        }
    }
    if (writer) manifest.shards.push_back(writer->finish());
    writeManifest(dir, manifest);
    return lengths;
}

LoaderSpec spec(std::vector<std::pair<std::string, double>> mix, std::uint64_t seqLen = 16, std::uint64_t batch = 6) {
    LoaderSpec s;
    for (const auto& [name, weight] : mix) s.sources.push_back({name, dataDir() / name, weight});
    s.seqLen = seqLen;
    s.globalBatch = batch;
    s.seed = 5;
    s.blockDocs = 4;
    s.windowBlocks = 3;
    return s;
}

struct Seen {
    std::uint64_t epoch, docPos, offset;
    std::vector<std::uint32_t> tokens;
};

// Runs `steps` steps from `cursor` and records every sample by source, as the
// planner reads it. The global batch is also read as `ranks` ranks read it,
// each through its own DataLoader with its slice (the real read-ahead path),
// and every slice must hold exactly the planner's samples. Returns the cursor after.
Cursor run(const LoaderSpec& s, Cursor cursor, std::uint64_t steps, int ranks, std::map<std::string, std::vector<Seen>>& seen,
           double* worstMixError = nullptr) {
    Corpus corpus(s);
    BatchPlanner planner(s, corpus);
    cursor = planner.resume(cursor);
    const std::uint64_t L = s.seqLen + 1;
    std::vector<std::unique_ptr<DataLoader>> loaders;
    for (int r = 0; r < ranks; ++r) {
        loaders.push_back(std::make_unique<DataLoader>(s, cursor));
        const std::uint64_t first = s.globalBatch * r / ranks, last = s.globalBatch * (r + 1) / ranks;
        loaders.back()->setSlice(first, last - first);
    }
    for (std::uint64_t step = 0; step < steps; ++step) {
        const StepPlan plan = planner.plan(cursor);
        EXPECT_EQ(plan.step, cursor.step);
        for (std::uint64_t i = 0; i < s.globalBatch; ++i) {
            const SampleStart& start = plan.samples[i];
            Seen sample{start.epoch, start.docPos, start.tokenOffset, std::vector<std::uint32_t>(L)};
            planner.readSample(start, sample.tokens.data());
            // The rank whose slice holds sample i read exactly these tokens.
            const int r = static_cast<int>(std::upper_bound(loaders.begin(), loaders.end(), i,
                                                            [&](std::uint64_t j, const auto& l) { return j < l->current().first; }) -
                                           loaders.begin()) - 1;
            const Batch& batch = loaders[static_cast<std::size_t>(r)]->current();
            EXPECT_EQ(batch.step, cursor.step);
            const auto offset = static_cast<std::ptrdiff_t>((i - batch.first) * L);
            EXPECT_TRUE(std::equal(sample.tokens.begin(), sample.tokens.end(), batch.tokens.begin() + offset))
                << "rank " << r << " of " << ranks << ", sample " << i << " of step " << cursor.step;
            seen[s.sources[start.source].name].push_back(std::move(sample));
        }
        for (auto& loader : loaders) {
            loader->commit();
            EXPECT_EQ(loader->cursor(), plan.next);
        }
        cursor = plan.next;
        if (worstMixError) {
            const std::uint64_t k = cursor.samples - cursor.segmentStart;
            for (std::size_t src = 0; src < s.sources.size(); ++src) {
                const double error = std::abs(double(cursor.sources[src].samples - cursor.sources[src].segmentBase) -
                                              planner.targetShare(src) * double(k));
                *worstMixError = std::max(*worstMixError, error);
            }
        }
        // A save and restore through the serialised form, as a checkpoint does.
        std::vector<std::string> names;
        for (const auto& c : cursor.sources) names.push_back(c.name);
        cursor = cursorFromRow(cursorToRow(cursor), names);
    }
    return cursor;
}

// Checks exactly-once for one source (see the file comment). Returns completed epochs.
std::uint64_t expectExactlyOnce(const std::string& name, const std::vector<std::uint64_t>& lengths,
                                std::vector<Seen> samples, const SourceCursor& cursor, std::uint64_t seqLen) {
    std::sort(samples.begin(), samples.end(), [](const Seen& a, const Seen& b) {
        return std::tie(a.epoch, a.docPos, a.offset) < std::tie(b.epoch, b.docPos, b.offset);
    });
    std::uint64_t epochTokens = 0;
    for (auto l : lengths) epochTokens += l + 1;
    std::map<std::uint64_t, std::map<std::uint32_t, std::uint64_t>> targetsOfDoc;  // epoch -> doc marker -> count
    std::map<std::uint64_t, std::uint64_t> targetsInEpoch;
    for (std::size_t i = 0; i < samples.size(); ++i) {
        if (i > 0 && samples[i].epoch == samples[i - 1].epoch) {
            EXPECT_FALSE(samples[i].docPos == samples[i - 1].docPos && samples[i].offset == samples[i - 1].offset)
                << name << ": one sample taken twice";
        }
        for (std::size_t k = 1; k < samples[i].tokens.size(); ++k) {
            targetsOfDoc[samples[i].epoch][samples[i].tokens[k]]++;
            targetsInEpoch[samples[i].epoch]++;
        }
    }
    std::uint64_t droppedSeen = 0;
    for (std::uint64_t e = 0; e < cursor.epoch; ++e) {
        // Every target of the epoch, plus its first token (an input only), plus the
        // dropped tail, is the whole epoch: nothing repeated, nothing skipped.
        const std::uint64_t dropped = epochTokens - 1 - targetsInEpoch[e];
        EXPECT_LT(dropped, seqLen + 1) << name << " epoch " << e << ": a dropped tail is shorter than a sample";
        droppedSeen += dropped;
        // No document token is a target twice; the only document tokens that are
        // no target are the epoch's first token and the dropped tail.
        std::uint64_t missing = 0;
        for (std::uint32_t d = 1; d <= lengths.size(); ++d) {
            const std::uint64_t n = targetsOfDoc[e][d];
            EXPECT_LE(n, lengths[d - 1]) << name << " epoch " << e << " document " << d - 1 << " seen more than once";
            missing += lengths[d - 1] - std::min(n, lengths[d - 1]);
        }
        EXPECT_LE(missing, dropped + 1) << name << " epoch " << e << ": document tokens skipped";
    }
    EXPECT_EQ(droppedSeen, cursor.tokensDropped) << name << ": the cursor counts the dropped tails";
    return cursor.epoch;
}

class LoaderTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        lengthsA_ = makeSource("a", 37, 40, 1);
        lengthsB_ = makeSource("b", 23, 25, 2);
        lengthsC_ = makeSource("c", 11, 30, 3);
    }
    static inline std::vector<std::uint64_t> lengthsA_, lengthsB_, lengthsC_;
};

}  // namespace

TEST_F(LoaderTest, ExactlyOnceAcrossEpochsRestoresRankCountsAndAWeightChange) {
    std::map<std::string, std::vector<Seen>> seen;
    double worst = 0.0;
    const auto first = spec({{"a", 0.7}, {"b", 0.3}});
    Cursor cursor;
    {
        Corpus corpus(first);
        cursor = BatchPlanner(first, corpus).initial();
    }
    cursor = run(first, cursor, 40, 1, seen, &worst);
    cursor = run(first, cursor, 37, 2, seen, &worst);
    cursor = run(first, cursor, 29, 3, seen, &worst);
    const std::uint64_t samplesBefore = cursor.samples;
    // New weights and a new source, on 5 ranks.
    const auto second = spec({{"b", 0.5}, {"c", 0.25}, {"a", 0.25}});
    cursor = run(second, cursor, 61, 5, seen, &worst);
    EXPECT_EQ(cursor.segmentStart, samplesBefore) << "new weights start a new segment";
    EXPECT_LT(worst, 1.0) << "realised mix within one sample of the target at every step";
    EXPECT_GE(expectExactlyOnce("a", lengthsA_, seen["a"], *cursor.find("a"), 16), 3u);
    EXPECT_GE(expectExactlyOnce("b", lengthsB_, seen["b"], *cursor.find("b"), 16), 3u);
    EXPECT_GE(expectExactlyOnce("c", lengthsC_, seen["c"], *cursor.find("c"), 16), 3u);
}

TEST_F(LoaderTest, GlobalBatchesDoNotDependOnSlicingOrRestores) {
    const auto s = spec({{"a", 2}, {"b", 1}});
    std::map<std::string, std::vector<Seen>> straight, pieces;
    Cursor start;
    {
        Corpus corpus(s);
        start = BatchPlanner(s, corpus).initial();
    }
    const Cursor end1 = run(s, start, 30, 1, straight);
    Cursor c = run(s, start, 7, 4, pieces);
    c = run(s, c, 11, 3, pieces);
    const Cursor end2 = run(s, c, 12, 2, pieces);
    EXPECT_EQ(end1, end2);
    for (const auto& name : {"a", "b"}) {
        ASSERT_EQ(straight[name].size(), pieces[name].size());
        for (std::size_t i = 0; i < straight[name].size(); ++i) ASSERT_EQ(straight[name][i].tokens, pieces[name][i].tokens);
    }
}

TEST_F(LoaderTest, DataLoaderPrefetchesCommitsAndReplays) {
    auto s = spec({{"a", 1}, {"b", 1}});
    s.prefetchSteps = 3;
    Corpus corpus(s);
    BatchPlanner planner(s, corpus);
    DataLoader loader(s, planner.initial());
    loader.setSlice(2, 3);
    const Batch first = loader.current();  // a copy: the loader's own batch is replaced below
    EXPECT_EQ(first.step, 0u);
    EXPECT_EQ(first.count, 3u);
    // A failed step: recovery re-slices (which restarts the read-ahead from the
    // committed cursor) and replays. The replay holds the same samples.
    loader.setSlice(0, s.globalBatch);
    const Batch& whole = loader.current();
    EXPECT_EQ(whole.step, 0u) << "an uncommitted step is replayed";
    ASSERT_EQ(whole.count, s.globalBatch);
    const std::uint64_t L = s.seqLen + 1;
    EXPECT_TRUE(std::equal(first.tokens.begin(), first.tokens.end(), whole.tokens.begin() + 2 * L))
        << "the replayed batch holds the same samples";
    loader.setSlice(2, 3);
    EXPECT_EQ(loader.current().tokens, first.tokens) << "and the same slice of them";
    loader.commit();
    EXPECT_EQ(loader.current().step, 1u);
    EXPECT_EQ(loader.cursor().step, 1u);
    // The slice matches what the planner gives for the same samples.
    const StepPlan plan = planner.plan(planner.initial());
    std::vector<std::uint32_t> expected(s.seqLen + 1);
    planner.readSample(plan.samples[2], expected.data());
    EXPECT_TRUE(std::equal(expected.begin(), expected.end(), first.tokens.begin()));
    const auto accounts = loader.accounts();
    ASSERT_EQ(accounts.size(), 2u);
    EXPECT_EQ(accounts[0].samples + accounts[1].samples, s.globalBatch);
    EXPECT_DOUBLE_EQ(accounts[0].targetShare, 0.5);
}

TEST_F(LoaderTest, BadSpecsAreNamed) {
    const auto missing = spec({{"a", 1}, {"nope", 1}});
    try {
        Corpus corpus(missing);
        FAIL();
    } catch (const kiln::InputError& e) {
        EXPECT_NE(std::string(e.what()).find("data.mix names source 'nope'"), std::string::npos) << e.what();
    }
    auto bytes = spec({{"a", 1}});
    bytes.tokenizer = "bytes";
    try {
        Corpus corpus(bytes);
        FAIL();
    } catch (const kiln::InputError& e) {
        EXPECT_NE(std::string(e.what()).find("prepared with tokenizer marker-tokenizer"), std::string::npos) << e.what();
    }
    const auto tooLong = spec({{"c", 1}}, 100000);
    EXPECT_THROW(Corpus corpus(tooLong), kiln::InputError);
}

// Pass criterion: a rank without a slice (a pipeline's middle stage) plans
// the same batches as one that reads them all, step for step, from shards
// read by the block, without reading a single block's tokens (nor before it
// was sliced: the read-ahead starts with the slice).
TEST_F(LoaderTest, AnEmptySliceKeepsInStepWithoutReadingTokens) {
    makeSource("blocky", 3000, 6, 17, 4000);  // shards of about 1 100 documents: read by the block
    const auto s = spec({{"blocky", 1}});
    auto corpus = std::make_shared<Corpus>(s);
    const Cursor start = BatchPlanner(s, *corpus).initial();
    DataLoader middle(s, corpus, start), full(s, start);
    middle.setSlice(0, 0);  // before it, no read-ahead of the whole batch either
    for (int step = 0; step < 40; ++step) {
        EXPECT_TRUE(middle.current().tokens.empty());
        EXPECT_EQ(full.current().tokens.size(), s.globalBatch * (s.seqLen + 1));
        middle.commit();
        full.commit();
        ASSERT_EQ(middle.cursor(), full.cursor()) << "step " << step;
    }
    EXPECT_GT(corpus->reader(0).blocksInMemory(), 0u) << "the source is read by the block";
    EXPECT_EQ(corpus->reader(0).blockTokenReads(), 0u);
}

// Pass criterion: with the source's length index, every rank plans the same
// batches as from the shards' offsets, step for step and token for token, and
// a rank without a slice opens no shard at all (what a pipeline's middle
// stages and thousands of small-slice ranks gain: no metadata storm).
TEST_F(LoaderTest, ALengthIndexPlansTheSameBatchesWithoutOpeningShards) {
    makeSource("indexed", 3000, 6, 19, 400);  // some 130 small shards, read by the block
    auto fromShards = spec({{"indexed", 1}});
    fromShards.useLengthIndex = false;
    auto indexed = fromShards;
    indexed.useLengthIndex = true;
    writeDocLengths(dataDir() / "indexed", readManifest(dataDir() / "indexed"));

    auto plain = std::make_shared<Corpus>(fromShards);
    auto withIndex = std::make_shared<Corpus>(indexed), middleCorpus = std::make_shared<Corpus>(indexed);
    ASSERT_FALSE(plain->reader(0).plansFromLengthIndex());
    ASSERT_TRUE(withIndex->reader(0).plansFromLengthIndex());
    const Cursor start = BatchPlanner(fromShards, *plain).initial();
    ASSERT_EQ(BatchPlanner(indexed, *withIndex).initial(), start);
    const std::uint64_t openedAtStart = middleCorpus->reader(0).shardOpenings();
    DataLoader a(fromShards, plain, start), b(indexed, withIndex, start), middle(indexed, middleCorpus, start);
    a.setSlice(0, fromShards.globalBatch);
    b.setSlice(0, indexed.globalBatch);
    middle.setSlice(0, 0);
    for (int step = 0; step < 300; ++step) {  // past the first epoch's end (about 10 500 tokens)
        ASSERT_EQ(a.current().tokens, b.current().tokens) << "step " << step;
        EXPECT_TRUE(middle.current().tokens.empty());
        a.commit();
        b.commit();
        middle.commit();
        ASSERT_EQ(a.cursor(), b.cursor()) << "step " << step;
        ASSERT_EQ(a.cursor(), middle.cursor()) << "step " << step;
    }
    EXPECT_GT(a.cursor().sources[0].epoch, 0u) << "an epoch's end and its dropped tail were planned from the index too";
    EXPECT_EQ(middleCorpus->reader(0).shardOpenings(), openedAtStart) << "planning opened a shard";
    EXPECT_GT(middleCorpus->reader(0).lengthGroupReads(), 0u);
}
