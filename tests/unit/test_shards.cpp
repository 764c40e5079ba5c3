// Shards and the reader: documents in = documents out across shard
// boundaries, at both token widths; corruption, truncation, missing pieces and
// tokenizer mismatches are detected and named; a crash leaves no shard.
#include "kiln/base/error.hpp"
#include "kiln/data/shard_writer.hpp"
#include "kiln/data/source_manifest.hpp"
#include "kiln/data/source_reader.hpp"
#include "kiln/data/source_verify.hpp"

#include "../support/error_text.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <random>

namespace fs = std::filesystem;
using namespace kiln::data;

using kiln::test::errorOf;

namespace {

struct Corpus {
    fs::path dir;
    std::vector<std::vector<std::uint32_t>> docs;
    SourceManifest manifest;
};

// Writes `numDocs` random documents into shards of about `shardTokens` tokens.
Corpus writeCorpus(const std::string& name, std::uint32_t vocab, std::size_t numDocs, std::uint64_t shardTokens) {
    Corpus c;
    c.dir = fs::temp_directory_path() / ("kiln-shards-" + std::to_string(::getpid())) / name;
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
            writer = std::make_unique<ShardWriter>(c.dir / ("shard-" + std::to_string(c.manifest.shards.size()) + ".h5"),
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

TEST(Shards, TruncatedShardIsNamed) {
    const auto c = writeCorpus("truncated", 1000, 100, 4000);
    const fs::path shard = c.dir / c.manifest.shards[0].file;
    fs::resize_file(shard, fs::file_size(shard) / 2);
    SourceReader reader(c.dir);
    const std::string error = errorOf([&] { reader.readDocument(0); });
    EXPECT_NE(error.find(shard.string()), std::string::npos) << error;
    EXPECT_NE(error.find("truncated"), std::string::npos) << error;
    EXPECT_FALSE(verifySource(reader).ok());
}

TEST(Shards, MissingShardAndMissingManifestAreNamed) {
    const auto c = writeCorpus("missing", 1000, 50, 2000);
    fs::remove(c.dir / c.manifest.shards.back().file);
    SourceReader reader(c.dir);
    EXPECT_NE(errorOf([&] { reader.readDocument(c.docs.size() - 1); }).find("shard listed in the manifest is missing"),
              std::string::npos);
    fs::remove(c.dir / kManifestName);
    EXPECT_NE(errorOf([&] { SourceReader again(c.dir); }).find("no manifest.json: the source is incomplete"),
              std::string::npos);
    EXPECT_NE(errorOf([&] { SourceReader none(c.dir / "nope"); }).find("no such directory"), std::string::npos);
}

TEST(Shards, ManifestThatDisagreesWithAShardIsNamed) {
    auto c = writeCorpus("disagree", 1000, 50, 2000);
    c.manifest.shards[0].numTokens += 1;
    writeManifest(c.dir, c.manifest);
    SourceReader reader(c.dir);
    const std::string error = errorOf([&] { reader.readDocument(0); });
    EXPECT_NE(error.find("n_tokens is"), std::string::npos) << error;
}

TEST(Shards, TokenizerMismatchNamesBoth) {
    const auto c = writeCorpus("tokmismatch", 1000, 10, 2000);
    SourceReader reader(c.dir);
    EXPECT_NO_THROW(reader.requireTokenizer({"test-tokenizer", 1000, 999}));
    const std::string error = errorOf([&] { reader.requireTokenizer({"bytes-v1", 257, 256}); });
    EXPECT_NE(error.find("prepared with tokenizer test-tokenizer"), std::string::npos) << error;
    EXPECT_NE(error.find("this run uses tokenizer bytes-v1"), std::string::npos) << error;
}

TEST(ShardWriter, UnfinishedShardLeavesNothing) {
    const fs::path dir = fs::temp_directory_path() / ("kiln-partial-" + std::to_string(::getpid()));
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
    const fs::path dir = fs::temp_directory_path() / ("kiln-badid-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    ShardWriter writer(dir / "shard-0.h5", ShardHeader{"s", {"t", 100, 99}, 16});
    const std::vector<std::uint32_t> doc{1, 2, 100};
    const std::string error = errorOf([&] { writer.addDocument(doc); });
    EXPECT_NE(error.find("token id 100 is not below the vocabulary size 100"), std::string::npos) << error;
}
