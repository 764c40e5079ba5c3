// Shards and the reader: documents in = documents out across shard
// boundaries, at both token widths; corruption, truncation, missing pieces and
// tokenizer mismatches are detected and named; a crash leaves no shard.
#include "kiln/base/error.hpp"
#include "kiln/data/corpus.hpp"
#include "kiln/data/shard_writer.hpp"
#include "kiln/data/source_manifest.hpp"
#include "kiln/data/source_reader.hpp"
#include "kiln/data/source_verify.hpp"

#include <nlohmann/json.hpp>

#include "../support/error_text.hpp"
#include "../support/stored_bit.hpp"

#include "../support/scratch_dir.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>
#include <set>

namespace fs = std::filesystem;
using namespace kiln::data;

using kiln::test::errorOf;

namespace {

struct Corpus {
    fs::path dir;
    std::vector<std::vector<std::uint32_t>> docs;
    SourceManifest manifest;
};

// Writes `numDocs` random documents into shards of about `shardTokens` tokens,
// named as kiln prep names them (`legacyNames`: as hand-made sources might).
Corpus writeCorpus(const std::string& name, std::uint32_t vocab, std::size_t numDocs, std::uint64_t shardTokens,
                   bool legacyNames = false) {
    Corpus c;
    c.dir = kiln::test::processScratch("kiln-shards") / name;
    fs::remove_all(c.dir);
    fs::create_directories(c.dir);
    std::mt19937_64 rng(42);
    const TokenizerInfo tokenizer{"test-tokenizer", vocab, vocab - 1};
    c.manifest = {name, tokenizer, tokenBitsFor(vocab), {}};
    std::unique_ptr<ShardWriter> writer;
    for (std::size_t d = 0; d < numDocs; ++d) {
        std::vector<std::uint32_t> doc(rng() % 300);  // includes empty documents
        for (auto& t : doc) t = static_cast<std::uint32_t>(rng() % vocab);
        if (!writer)
            writer = std::make_unique<ShardWriter>(
                c.dir / (legacyNames ? "shard-" + std::to_string(c.manifest.shards.size()) + ".h5"
                                     : shardFileName(c.manifest.shards.size())),
                ShardHeader{name, tokenizer, tokenBitsFor(vocab)});
        writer->addDocument(doc);
        c.docs.push_back(doc);
        if (writer->numTokens() >= shardTokens) {
            c.manifest.shards.push_back(writer->finish());
            writer.reset();
        }
    }
    if (writer) c.manifest.shards.push_back(writer->finish());
    writeManifest(c.dir, c.manifest);
    return c;
}

void expectAllDocuments(const Corpus& c) {
    SourceReader reader(c.dir);
    ASSERT_EQ(reader.numDocuments(), c.docs.size());
    for (std::size_t d = 0; d < c.docs.size(); ++d) ASSERT_EQ(reader.readDocument(d), c.docs[d]) << "document " << d;
}

// Overwrites one token in place through HDF5: a bit flip the checksum must catch.
void flipToken(const fs::path& shard, std::uint64_t at) {
    hid_t file = H5Fopen(shard.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t dset = H5Dopen2(file, "tokens", H5P_DEFAULT);
    hid_t space = H5Dget_space(dset);
    hsize_t start[1] = {at}, one[1] = {1};
    H5Sselect_hyperslab(space, H5S_SELECT_SET, start, nullptr, one, nullptr);
    hid_t mem = H5Screate_simple(1, one, nullptr);
    std::uint32_t value = 0;
    H5Dread(dset, H5T_NATIVE_UINT32, mem, space, H5P_DEFAULT, &value);
    value ^= 1;
    H5Dwrite(dset, H5T_NATIVE_UINT32, mem, space, H5P_DEFAULT, &value);
    H5Sclose(mem);
    H5Sclose(space);
    H5Dclose(dset);
    H5Fclose(file);
}

}  // namespace

TEST(Shards, RoundTripAcrossShardBoundaries16Bit) {
    const auto c = writeCorpus("small-vocab", 1000, 400, 5000);
    EXPECT_GT(c.manifest.shards.size(), 5u);
    EXPECT_EQ(c.manifest.tokenBits, 16);
    expectAllDocuments(c);
}

TEST(Shards, RoundTripLargeVocabulary32Bit) {
    const auto c = writeCorpus("large-vocab", 100000, 200, 7000);
    EXPECT_EQ(c.manifest.tokenBits, 32);
    expectAllDocuments(c);
}

TEST(Shards, ReadsAnyTokenRangeOfAnyDocument) {
    const auto c = writeCorpus("ranges", 1000, 100, 3000);
    SourceReader reader(c.dir);
    std::mt19937 rng(7);
    for (int trial = 0; trial < 500; ++trial) {
        const std::size_t d = rng() % c.docs.size();
        const std::size_t length = c.docs[d].size();
        const std::size_t begin = length ? rng() % length : 0;
        const std::size_t count = length - begin ? rng() % (length - begin + 1) : 0;
        std::vector<std::uint32_t> out(count);
        reader.readTokens(d, begin, count, out.data());
        ASSERT_TRUE(std::equal(out.begin(), out.end(), c.docs[d].begin() + begin)) << d << " " << begin << " " << count;
    }
    EXPECT_THROW(reader.readTokens(0, 0, c.docs[0].size() + 1, nullptr), std::out_of_range);
    EXPECT_THROW(reader.locate(c.docs.size()), std::out_of_range);
}

TEST(Shards, VerifyPassesAndCountsEveryToken) {
    const auto c = writeCorpus("verify", 1000, 300, 4000);
    SourceReader reader(c.dir);
    const auto report = verifySource(reader);
    EXPECT_TRUE(report.ok()) << (report.problems.empty() ? "" : report.problems.front());
    std::uint64_t tokens = 0;
    for (const auto& d : c.docs) tokens += d.size();
    EXPECT_EQ(report.stats.numTokens, tokens);
    EXPECT_EQ(report.stats.numDocs, c.docs.size());
}

TEST(Shards, CorruptedTokenIsCaughtByChecksum) {
    const auto c = writeCorpus("corrupt", 1000, 100, 4000);
    flipToken(c.dir / c.manifest.shards[1].file, 17);
    SourceReader reader(c.dir);
    const auto report = verifySource(reader);
    ASSERT_EQ(report.problems.size(), 1u);
    EXPECT_NE(report.problems[0].find(c.manifest.shards[1].file), std::string::npos);
    EXPECT_NE(report.problems[0].find("checksum"), std::string::npos) << report.problems[0];
}

namespace {

ReaderOptions lazily() {
    ReaderOptions o;
    o.checkShardsAtOpen = false;
    return o;
}

// Every shard read through HDF5 chunk by chunk, none held whole in memory.
ReaderOptions throughFiles() {
    ReaderOptions o;
    o.wholeShardBytes = 0;
    return o;
}

// The (shard, block) pieces of a source's documents, blocks of 64.
std::set<std::pair<std::size_t, std::uint64_t>> blockPieces(const SourceReader& reader) {
    std::set<std::pair<std::size_t, std::uint64_t>> pieces;
    for (std::uint64_t d = 0; d < reader.numDocuments(); ++d) pieces.insert({reader.manifest().shards.shardOf(d), d / 64});
    return pieces;
}

// Documents 0 .. n-1 in an order as random as a shuffle window's.
std::vector<std::uint64_t> shuffledDocuments(std::size_t n, std::uint64_t seed) {
    std::vector<std::uint64_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), std::mt19937_64(seed));
    return order;
}

}  // namespace

// Pass criterion: a bit flipped on disk is caught on the read that would have
// delivered it (HDF5's per-chunk Fletcher-32), with an error naming the source,
// the shard and the chunk and pointing to kiln inspect; kiln inspect names it too.
TEST(Shards, BitFlippedOnDiskIsCaughtOnEveryRead) {
    const auto c = writeCorpus("flipped", 1000, 1200, 400000);
    ASSERT_EQ(c.manifest.shards.size(), 1u);
    ASSERT_GT(c.manifest.shards[0].numTokens, 2 * kTokenChunk);
    kiln::test::flipStoredBit(c.dir / c.manifest.shards[0].file, 1, 101);
    SourceReader reader(c.dir, throughFiles());
    EXPECT_TRUE(reader.checksummed());
    std::vector<std::uint32_t> token(1);
    EXPECT_NO_THROW(reader.readShardTokens(0, 5, 1, token.data())) << "chunk 0 is intact";
    const std::string error = errorOf([&] { reader.readShardTokens(0, kTokenChunk + 7, 1, token.data()); });
    EXPECT_NE(error.find("source flipped"), std::string::npos) << error;
    EXPECT_NE(error.find(c.manifest.shards[0].file), std::string::npos) << error;
    EXPECT_NE(error.find("in chunk 1"), std::string::npos) << error;
    EXPECT_NE(error.find("kiln inspect"), std::string::npos) << error;
    SourceReader again(c.dir, lazily());
    const auto report = verifySource(again);
    ASSERT_FALSE(report.ok());
    EXPECT_NE(report.problems[0].find("chunk 1"), std::string::npos) << report.problems[0];
    // Held whole in memory: the first read of any part of it meets the damage.
    ReaderOptions wholly;
    wholly.wholeShardDocs = 1u << 20;
    SourceReader whole(c.dir, wholly);
    const std::string first = errorOf([&] { whole.readShardTokens(0, 5, 1, token.data()); });
    EXPECT_NE(first.find("in chunk 1"), std::string::npos) << first;
    EXPECT_EQ(whole.shardsInMemory(), 0u);
}

// Pass criterion: a token id outside the vocabulary (checksums intact: it was
// written so) never leaves the reader; the error names source, shard, document.
TEST(Shards, IdOutsideTheVocabularyIsRefused) {
    const fs::path dir = kiln::test::processScratch("kiln-shards") / "badid";
    fs::remove_all(dir);
    fs::create_directories(dir);
    // The writer refuses such ids, so this shard is written for a larger vocabulary
    // than its manifest (the reader holds ids to the manifest's).
    const TokenizerInfo tokenizer{"test-tokenizer", 300, 299}, wider{"test-tokenizer", 65536, 65535};
    ShardWriter writer(dir / "shard-0.h5", ShardHeader{"badid", wider, 16});
    const std::vector<std::uint32_t> good{1, 2, 3}, bad{4, 5, 40000, 6};
    writer.addDocument(good);
    writer.addDocument(bad);
    SourceManifest manifest{"badid", tokenizer, 16, {}};
    manifest.shards.push_back(writer.finish());
    writeManifest(dir, manifest);
    SourceReader reader(dir);
    EXPECT_EQ(reader.readDocument(0).size(), 3u);
    std::vector<std::uint32_t> out(4);
    const std::string error = errorOf([&] { reader.readTokens(1, 0, 4, out.data()); });
    EXPECT_NE(error.find("source badid"), std::string::npos) << error;
    EXPECT_NE(error.find("document 1"), std::string::npos) << error;
    EXPECT_NE(error.find("id 40000, outside the vocabulary of 300"), std::string::npos) << error;
    EXPECT_NE(error.find("kiln inspect"), std::string::npos) << error;
}

// Pass criterion: problems of a shard's metadata are found when the source is
// opened (the loader opens its sources at start-up), not at first read.
TEST(Shards, TruncatedShardIsNamed) {
    const auto c = writeCorpus("truncated", 1000, 100, 4000);
    const fs::path shard = c.dir / c.manifest.shards[0].file;
    fs::resize_file(shard, fs::file_size(shard) / 2);
    const std::string atOpen = errorOf([&] { SourceReader reader(c.dir); });
    EXPECT_NE(atOpen.find(shard.string()), std::string::npos) << atOpen;
    EXPECT_NE(atOpen.find("truncated"), std::string::npos) << atOpen;
    SourceReader reader(c.dir, lazily());
    const std::string error = errorOf([&] { reader.readDocument(0); });
    EXPECT_NE(error.find(shard.string()), std::string::npos) << error;
    EXPECT_NE(error.find("truncated"), std::string::npos) << error;
    EXPECT_FALSE(verifySource(reader).ok());
}

TEST(Shards, MissingShardAndMissingManifestAreNamed) {
    const auto c = writeCorpus("missing", 1000, 50, 2000);
    fs::remove(c.dir / c.manifest.shards[c.manifest.shards.size() - 1].file);
    EXPECT_NE(errorOf([&] { SourceReader reader(c.dir); }).find("shard listed in the manifest is missing"),
              std::string::npos);
    SourceReader reader(c.dir, lazily());
    EXPECT_NE(errorOf([&] { reader.readDocument(c.docs.size() - 1); }).find("shard listed in the manifest is missing"),
              std::string::npos);
    fs::remove(c.dir / kManifestName);
    EXPECT_NE(errorOf([&] { SourceReader again(c.dir); }).find("no manifest.json: the source is incomplete"),
              std::string::npos);
    EXPECT_NE(errorOf([&] { SourceReader none(c.dir / "nope"); }).find("no such directory"), std::string::npos);
}

TEST(Shards, ManifestThatDisagreesWithAShardIsNamed) {
    auto c = writeCorpus("disagree", 1000, 50, 2000);
    ShardSummary first = c.manifest.shards[0];
    first.numTokens += 1;
    c.manifest.shards.set(0, first);
    writeManifest(c.dir, c.manifest);
    const std::string error = errorOf([&] { SourceReader reader(c.dir); });
    EXPECT_NE(error.find("n_tokens is"), std::string::npos) << error;
}

TEST(Shards, TokenizerMismatchNamesBoth) {
    const auto c = writeCorpus("tokmismatch", 1000, 10, 2000);
    SourceReader reader(c.dir);
    EXPECT_NO_THROW(reader.requireTokenizer({"test-tokenizer", 1000, 999, ""}));
    const std::string error = errorOf([&] { reader.requireTokenizer({"bytes-v1", 257, 256, ""}); });
    EXPECT_NE(error.find("prepared with tokenizer test-tokenizer"), std::string::npos) << error;
    EXPECT_NE(error.find("this run uses tokenizer bytes-v1"), std::string::npos) << error;
}

TEST(ShardWriter, UnfinishedShardLeavesNothing) {
    const fs::path dir = kiln::test::processScratch("kiln-partial");
    fs::create_directories(dir);
    {
        ShardWriter writer(dir / "shard-0.h5", ShardHeader{"s", {"t", 100, 99}, 16});
        const std::vector<std::uint32_t> doc(100000, 5);
        writer.addDocument(doc);
        EXPECT_TRUE(fs::exists(dir / "shard-0.h5.partial"));
        EXPECT_FALSE(fs::exists(dir / "shard-0.h5"));
    }  // destroyed without finish(), as after an exception
    EXPECT_TRUE(fs::is_empty(dir));
}

TEST(ShardWriter, RejectsIdsOutsideTheVocabulary) {
    const fs::path dir = kiln::test::processScratch("kiln-badid");
    fs::create_directories(dir);
    ShardWriter writer(dir / "shard-0.h5", ShardHeader{"s", {"t", 100, 99}, 16});
    const std::vector<std::uint32_t> doc{1, 2, 100};
    const std::string error = errorOf([&] { writer.addDocument(doc); });
    EXPECT_NE(error.find("token id 100 is not below the vocabulary size 100"), std::string::npos) << error;
}

namespace {

void expectSameShards(const ShardTable& a, const ShardTable& b) {
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
        EXPECT_EQ(a[i].file, b[i].file) << i;
        EXPECT_EQ(a[i].numDocs, b[i].numDocs) << i;
        EXPECT_EQ(a[i].numTokens, b[i].numTokens) << i;
        EXPECT_EQ(a[i].tokensCrc, b[i].tokensCrc) << i;
        EXPECT_EQ(a[i].offsetsCrc, b[i].offsetsCrc) << i;
    }
}

nlohmann::json jsonOf(const fs::path& file) {
    std::ifstream in(file);
    return nlohmann::json::parse(in);
}

}  // namespace

// Pass criterion: prep's sources keep their shards in index.h5 (columns, read
// back equal) and manifest.json holds only what a person reads, so its size
// does not grow with the shard count.
TEST(SourceIndex, ShardsLiveInTheIndexAndTheJsonHoldsTotals) {
    const auto c = writeCorpus("indexed", 1000, 300, 2000);
    ASSERT_GT(c.manifest.shards.size(), 20u);
    EXPECT_TRUE(fs::exists(c.dir / kIndexName));
    const auto j = jsonOf(c.dir / kManifestName);
    EXPECT_FALSE(j.contains("shards"));
    EXPECT_EQ(j.at("index"), kIndexName);
    EXPECT_EQ(j.at("n_shards"), c.manifest.shards.size());
    EXPECT_LT(fs::file_size(c.dir / kManifestName), 600u);
    expectSameShards(readManifest(c.dir).shards, c.manifest.shards);
    expectAllDocuments(c);
}

// Pass criterion: a source of manifest version 1 (shards listed in the JSON,
// no index) reads as before.
TEST(SourceIndex, ManifestVersionOneStaysReadable) {
    const auto c = writeCorpus("version-one", 1000, 120, 2000);
    auto j = jsonOf(c.dir / kManifestName);
    j["format_version"] = 1;
    j.erase("index");
    j.erase("n_shards");
    j["shards"] = nlohmann::json::parse(shardsToJson([&] {
        std::vector<ShardSummary> v;
        for (std::size_t i = 0; i < c.manifest.shards.size(); ++i) v.push_back(c.manifest.shards[i]);
        return v;
    }()));
    fs::remove(c.dir / kIndexName);
    std::ofstream(c.dir / kManifestName) << j.dump(2);
    expectSameShards(readManifest(c.dir).shards, c.manifest.shards);
    expectAllDocuments(c);
    // Shards under other names than prep's are listed in the JSON still.
    const auto legacy = writeCorpus("legacy-names", 1000, 60, 2000, /*legacyNames=*/true);
    EXPECT_FALSE(fs::exists(legacy.dir / kIndexName));
    EXPECT_TRUE(jsonOf(legacy.dir / kManifestName).contains("shards"));
    expectAllDocuments(legacy);
}

// Pass criterion: a damaged index is named, with what to do.
TEST(SourceIndex, TruncatedIndexIsNamed) {
    const auto c = writeCorpus("bad-index", 1000, 50, 2000);
    fs::resize_file(c.dir / kIndexName, fs::file_size(c.dir / kIndexName) / 3);
    const std::string error = errorOf([&] { SourceReader reader(c.dir); });
    EXPECT_NE(error.find((c.dir / kIndexName).string()), std::string::npos) << error;
    EXPECT_NE(error.find("prepare the source again"), std::string::npos) << error;
}

// Pass criterion: a shard much smaller than the default chunk is stored in
// chunks sized to it (an eighth of the shard), not padded to 64 Ki tokens, its
// offsets in chunks sized to their count, and a corrupt chunk is still named
// by its index and token range.
TEST(ShardWriter, SmallShardsGetSmallChunks) {
    const fs::path dir = kiln::test::processScratch("kiln-chunks");
    fs::create_directories(dir);
    const ShardHeader header{"s", {"t", 1000, 999}, 16};
    std::vector<std::uint32_t> doc(2000);
    for (std::size_t i = 0; i < doc.size(); ++i) doc[i] = static_cast<std::uint32_t>(i % 1000);
    EXPECT_EQ(tokenChunkFor(2048), 256u);
    EXPECT_EQ(tokenChunkFor(1'500'000), kBlockReadChunk);
    EXPECT_EQ(tokenChunkFor(kBlockReadChunk * kMaxChunksAShard), kBlockReadChunk);
    EXPECT_EQ(tokenChunkFor(1u << 26), kTokenChunk) << "1024 chunks, not 4096";
    EXPECT_EQ(tokenChunkFor(24u << 20), 48u * 1024) << "512 chunks";
    EXPECT_EQ(offsetChunkFor(21), 21u) << "one chunk";
    EXPECT_EQ(offsetChunkFor(1898), kMinOffsetChunk);
    EXPECT_EQ(offsetChunkFor(65537), 1025u) << "64 chunks";
    EXPECT_EQ(offsetChunkFor(10'000'001), kOffsetChunk);
    ShardWriter sized(dir / shardFileName(0), header, tokenChunkFor(2048));
    sized.addDocument(doc);
    SourceManifest manifest{"s", header.tokenizer, 16, {}};
    manifest.shards.push_back(sized.finish());
    ShardWriter padded(dir / "padded.h5", header);
    padded.addDocument(doc);
    padded.finish();
    const auto small = fs::file_size(dir / shardFileName(0)), big = fs::file_size(dir / "padded.h5");
    EXPECT_LT(small, 16u * 1024) << small;
    EXPECT_GT(big, 2 * kTokenChunk) << big;
    writeManifest(dir, manifest);
    kiln::test::flipStoredBit(dir / shardFileName(0), 3, 101);
    SourceReader reader(dir, throughFiles());
    std::vector<std::uint32_t> tokens(256);
    EXPECT_NO_THROW(reader.readShardTokens(0, 512, 256, tokens.data())) << "chunk 2 is intact";
    const std::string error = errorOf([&] { reader.readDocument(0); });
    EXPECT_NE(error.find("in chunk 3 (tokens [768, 1024))"), std::string::npos) << error;
}

// Pass criterion: without shuffle blocks, small shards are read whole once and
// served from memory (their files closed), within the memory budget; large
// ones stay open files within the handle budget; either way the documents
// read are the ones written.
TEST(Shards, SmallShardsAreHeldWholeWithinTheBudgets) {
    const auto c = writeCorpus("budgets", 1000, 400, 3000);  // 16-bit shards of about 3000 tokens
    ASSERT_GT(c.manifest.shards.size(), 20u);
    ReaderOptions tight = lazily();
    tight.blockDocs = 0;
    tight.shardMemoryBytes = 5 * (3300 * 4 + 30 * 8);  // about five shards
    SourceReader reader(c.dir, tight);
    for (int pass = 0; pass < 2; ++pass)
        for (std::size_t d = 0; d < c.docs.size(); ++d) ASSERT_EQ(reader.readDocument(d), c.docs[d]) << d;
    EXPECT_EQ(reader.openShards(), 0u);
    EXPECT_GE(reader.shardsInMemory(), 3u);
    EXPECT_LE(reader.shardsInMemory(), 6u);
    EXPECT_EQ(reader.shardOpenings(), 2 * c.manifest.shards.size()) << "each shard opened once per pass";

    ReaderOptions files = throughFiles();
    files.checkShardsAtOpen = false;
    files.maxOpenShards = 3;
    SourceReader small(c.dir, files);
    for (std::size_t d = 0; d < c.docs.size(); ++d) ASSERT_EQ(small.readDocument(d), c.docs[d]) << d;
    EXPECT_EQ(small.openShards(), 3u);
    EXPECT_EQ(small.shardsInMemory(), 0u);
}

// Pass criterion: with shuffle blocks, shards smaller than a block are read by
// the piece of a block they hold, not whole: each (shard, block) piece is
// opened once while the memory holds it, none is held whole, the documents
// are the ones written; and a rank that only looks lengths up (blocks'
// tokens on demand) reads no token of them.
TEST(Shards, SmallShardsAreReadByTheBlockNotWhole) {
    const auto c = writeCorpus("small-blocks", 1000, 400, 3000);  // about 27 documents a shard: most straddle blocks
    ASSERT_GT(c.manifest.shards.size(), 20u);
    ReaderOptions options = lazily();
    options.blockDocs = 64;
    SourceReader reader(c.dir, options);
    const auto pieces = blockPieces(reader);
    ASSERT_GT(pieces.size(), c.manifest.shards.size()) << "some shards straddle two blocks";
    const auto order = shuffledDocuments(c.docs.size(), 11);
    for (std::uint64_t d : order) ASSERT_EQ(reader.readDocument(d), c.docs[d]) << d;
    EXPECT_EQ(reader.shardsInMemory(), 0u) << "not held whole";
    EXPECT_EQ(reader.blocksInMemory(), pieces.size());
    EXPECT_EQ(reader.shardOpenings(), pieces.size());

    options.blockTokensOnDemand = true;
    SourceReader planning(c.dir, options);
    for (std::uint64_t d : order) ASSERT_EQ(planning.documentLength(d), c.docs[d].size()) << d;
    EXPECT_EQ(planning.blockTokenReads(), 0u) << "lengths need offsets only";
    EXPECT_EQ(planning.readDocument(order[0]), c.docs[order[0]]);
    EXPECT_EQ(planning.blockTokenReads(), 1u);
}

// Pass criterion: shards too large to hold whole but of short documents are
// read by the shuffle block (straddling shards included): every document
// comes back, no file stays open, each (shard, block) piece is opened once
// while the memory holds it, the budget bounds what is held, and a damaged
// chunk under a block is named.
TEST(Shards, LargeShardsOfShortDocumentsAreReadByTheBlock) {
    const auto c = writeCorpus("blocks", 1000, 1500, 60000);  // about 400 documents a shard: blocks straddle shards
    ASSERT_GE(c.manifest.shards.size(), 3u);
    ReaderOptions options = lazily();
    options.blockDocs = 64;
    SourceReader reader(c.dir, options);
    const auto pieces = blockPieces(reader);
    const auto order = shuffledDocuments(c.docs.size(), 7);
    for (int pass = 0; pass < 2; ++pass)
        for (std::uint64_t d : order) ASSERT_EQ(reader.readDocument(d), c.docs[d]) << d;
    EXPECT_EQ(reader.openShards(), 0u);
    EXPECT_EQ(reader.shardsInMemory(), 0u);
    EXPECT_EQ(reader.blocksInMemory(), pieces.size());
    EXPECT_EQ(reader.shardOpenings(), pieces.size()) << "each piece opened once: the memory held them all";

    ReaderOptions tight = options;
    tight.shardMemoryBytes = 3 * 64 * 160 * 4;  // about three blocks
    SourceReader small(c.dir, tight);
    for (std::uint64_t d : order) ASSERT_EQ(small.readDocument(d), c.docs[d]) << d;
    EXPECT_LE(small.blocksInMemory(), 4u);
    EXPECT_GT(small.shardOpenings(), pieces.size());

    kiln::test::flipStoredBit(c.dir / c.manifest.shards[1].file, 0, 101);
    SourceReader damaged(c.dir, options);
    const std::uint64_t doc = reader.manifest().shards.docStarts()[1];  // the shard's first document, in chunk 0
    ASSERT_FALSE(c.docs[doc].empty());
    const std::string error = errorOf([&] { damaged.readDocument(doc); });
    EXPECT_NE(error.find(c.manifest.shards[1].file), std::string::npos) << error;
    EXPECT_NE(error.find("in chunk 0"), std::string::npos) << error;
}

// Pass criterion: with block tokens on demand (a rank that plans every batch
// but reads a small slice, or none), looking documents up reads their
// blocks' offsets alone; a document read brings its block's tokens, once,
// and the same tokens as a block read whole; a damaged token chunk is named
// by the read that needs it, while the lengths around it stay readable.
TEST(Shards, BlockTokensOnDemandAreReadOnlyForTheDocumentsRead) {
    const auto c = writeCorpus("on-demand", 1000, 1500, 60000);
    ReaderOptions options = lazily();
    options.blockDocs = 64;
    options.blockTokensOnDemand = true;
    SourceReader reader(c.dir, options);
    std::set<std::pair<std::size_t, std::uint64_t>> pieces, read;
    for (std::uint64_t d = 0; d < c.docs.size(); ++d) {
        ASSERT_EQ(reader.documentLength(d), c.docs[d].size()) << d;
        pieces.insert({reader.manifest().shards.shardOf(d), d / 64});
    }
    EXPECT_EQ(reader.blocksInMemory(), pieces.size());
    EXPECT_EQ(reader.blockTokenReads(), 0u) << "lengths need no tokens";
    for (std::uint64_t d = 5; d < c.docs.size(); d += 300) {
        ASSERT_EQ(reader.readDocument(d), c.docs[d]) << d;
        ASSERT_EQ(reader.readDocument(d), c.docs[d]) << d;
        read.insert({reader.manifest().shards.shardOf(d), d / 64});
    }
    EXPECT_EQ(reader.blockTokenReads(), read.size()) << "each block's tokens read once, at its first document read";
    EXPECT_LT(read.size(), pieces.size() / 2);

    kiln::test::flipStoredBit(c.dir / c.manifest.shards[1].file, 0, 101);
    SourceReader damaged(c.dir, options);
    const std::uint64_t doc = reader.manifest().shards.docStarts()[1];  // the shard's first document, in chunk 0
    ASSERT_FALSE(c.docs[doc].empty());
    EXPECT_EQ(damaged.documentLength(doc), c.docs[doc].size());
    const std::string error = errorOf([&] { damaged.readDocument(doc); });
    EXPECT_NE(error.find(c.manifest.shards[1].file), std::string::npos) << error;
    EXPECT_NE(error.find("in chunk 0"), std::string::npos) << error;
}

// Pass criterion: a table whose checksums were dropped keeps its shape and
// counts, and refuses to hand out checksums it no longer has.
TEST(ShardTable, DroppedChecksumsAreRefusedNotInvented) {
    const auto c = writeCorpus("dropped", 1000, 300, 5000);
    ShardTable table = c.manifest.shards;
    ASSERT_GT(table.size(), 2u);
    const std::size_t n = table.size();
    const std::uint64_t docs = table.numDocs(1), tokens = table.totalTokens();
    table.dropChecksums();
    EXPECT_FALSE(table.hasChecksums());
    EXPECT_EQ(table.size(), n);
    EXPECT_EQ(table.numDocs(1), docs);
    EXPECT_EQ(table.totalTokens(), tokens);
    EXPECT_EQ(table.shardOf(table.docStarts()[2]), 2u);
    EXPECT_THROW(table.tokensCrc(0), std::logic_error);
    EXPECT_THROW(table[0], std::logic_error);
    EXPECT_TRUE(c.manifest.shards.hasChecksums()) << "a copy dropped them, not the original";
}

// Pass criterion: data.shard_memory_mb = 0 sizes a reader's memory to one
// shuffle window of the source (64 blocks of 64 documents here), a quarter
// more, whatever the shards' size, within 8 to 256 MiB.
TEST(ShardTable, WindowMemoryFollowsTheMeanDocument) {
    const auto table = [](std::uint64_t shards, std::uint64_t docs, std::uint64_t tokens) {
        return ShardTable::fromColumns(std::vector<std::uint64_t>(shards, docs), std::vector<std::uint64_t>(shards, tokens),
                                       std::vector<std::uint32_t>(shards, 0), std::vector<std::uint32_t>(shards, 0));
    };
    const double block = 64.0 * (1000 * 4 + 8);  // 64 documents of 1 000 tokens, with their offsets
    EXPECT_NEAR(double(windowMemoryBytes(table(10, 2000, 2'000'000), 64, 64)), 1.25 * 64 * block, 1e3)
        << "read by the block";
    EXPECT_NEAR(double(windowMemoryBytes(table(100, 100, 100'000), 64, 64)), 1.25 * 64 * block, 1e3)
        << "small shards, read by the block too";
    EXPECT_EQ(windowMemoryBytes(table(10, 2000, 2'000'000), 64, 4), 8u << 20) << "at least 8 MiB";
    EXPECT_EQ(windowMemoryBytes(table(10, 50, 10'000'000), 64, 64), 256u << 20) << "at most 256 MiB";
}
