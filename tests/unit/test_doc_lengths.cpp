// The length index (doc_lengths.h5): it lists every document's length as the
// shards hold it, across shards and checksum groups; a corrupt group, a
// truncated file and an index of another preparation of the source are
// refused with errors that name the file (and the shard, where they disagree).
#include "kiln/base/error.hpp"
#include "kiln/data/doc_lengths.hpp"
#include "kiln/data/shard_chunks.hpp"
#include "kiln/data/shard_writer.hpp"
#include "kiln/data/source_reader.hpp"
#include "kiln/data/source_verify.hpp"

#include "../support/error_text.hpp"

#include "../support/scratch_dir.hpp"

#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;
using namespace kiln::data;
using kiln::test::errorOf;

namespace {

// `docs` documents of lengths d * 7 % 61 (empty ones included) in shards of about 2 000 tokens.
std::vector<std::uint64_t> writeSource(const fs::path& dir, std::size_t docs, std::uint32_t salt = 0) {
    fs::remove_all(dir);
    fs::create_directories(dir);
    const TokenizerInfo tokenizer{"test-tokenizer", 500, 499};
    SourceManifest manifest{dir.filename().string(), tokenizer, 16, {}};
    std::vector<std::uint64_t> lengths;
    std::unique_ptr<ShardWriter> writer;
    for (std::size_t d = 0; d < docs; ++d) {
        if (!writer)
            writer = std::make_unique<ShardWriter>(dir / shardFileName(manifest.shards.size()),
                                                   ShardHeader{manifest.source, tokenizer, 16});
        lengths.push_back((d * 7 + salt) % 61);
        writer->addDocument(std::vector<std::uint32_t>(lengths.back(), static_cast<std::uint32_t>(d % 499)));
        if (writer->numTokens() >= 2000) {
            manifest.shards.push_back(writer->finish());
            writer.reset();
        }
    }
    if (writer) manifest.shards.push_back(writer->finish());
    writeManifest(dir, manifest);
    writeDocLengths(dir, manifest);
    return lengths;
}

fs::path testDir(const std::string& name) {
    return kiln::test::processScratch("kiln-lengths") / name;
}

// Where /doc_lengths (or its checksums) start in the file.
std::uint64_t placeOf(const fs::path& file, const char* set) {
    const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    const hid_t d = H5Dopen2(f, set, H5P_DEFAULT);
    const haddr_t at = H5Dget_offset(d);
    H5Dclose(d);
    H5Fclose(f);
    return at;
}

template <typename T>
void overwrite(const fs::path& file, std::uint64_t at, const T& value) {
    std::fstream out(file, std::ios::in | std::ios::out | std::ios::binary);
    out.seekp(static_cast<std::streamoff>(at));
    out.write(reinterpret_cast<const char*>(&value), sizeof value);
}

ReaderOptions lazily() {
    ReaderOptions o;
    o.checkShardsAtOpen = false;
    return o;
}

}  // namespace

TEST(DocLengths, ListEveryDocumentAcrossShardsAndGroups) {
    const fs::path dir = testDir("listed");
    const auto expected = writeSource(dir, 2500);  // groups of 1024, 1024 and 452
    SourceReader reader(dir, lazily());
    ASSERT_TRUE(reader.plansFromLengthIndex());
    ASSERT_GT(reader.manifest().shards.size(), 10u);
    for (std::uint64_t d = 0; d < expected.size(); ++d) ASSERT_EQ(reader.documentLength(d), expected[d]) << "document " << d;
    EXPECT_EQ(reader.shardOpenings(), 0u) << "lengths came from the index alone";
    EXPECT_EQ(reader.lengthGroupReads(), 3u);
    EXPECT_THROW(reader.documentLength(expected.size()), std::out_of_range);
    ReaderOptions fromShards = lazily();
    fromShards.useLengthIndex = false;
    SourceReader plain(dir, fromShards);
    EXPECT_FALSE(plain.plansFromLengthIndex());
    for (std::uint64_t d = 0; d < expected.size(); d += 97) EXPECT_EQ(plain.documentLength(d), expected[d]);
    SourceReader checked(dir, lazily());
    EXPECT_TRUE(verifySource(checked).ok());
}

TEST(DocLengths, CorruptGroupIsNamed) {
    const fs::path dir = testDir("corrupt");
    writeSource(dir, 2500);
    const fs::path file = dir / kDocLengthsName;
    overwrite(file, placeOf(file, "doc_lengths") + 4 * (1024 + 5), std::uint32_t{12345});
    SourceReader reader(dir, lazily());
    EXPECT_NO_THROW(reader.documentLength(5)) << "group 0 is intact";
    const std::string error = errorOf([&] { reader.documentLength(1030); });
    EXPECT_NE(error.find(file.string()), std::string::npos) << error;
    EXPECT_NE(error.find("documents 1024 .. 2047 fail their checksum"), std::string::npos) << error;
    EXPECT_NE(error.find("--write-lengths"), std::string::npos) << error;
    SourceReader again(dir, lazily());
    const auto report = verifySource(again);
    ASSERT_FALSE(report.ok());
    EXPECT_NE(report.problems[0].find(kDocLengthsName), std::string::npos) << report.problems[0];
}

TEST(DocLengths, TruncatedIndexIsNamed) {
    const fs::path dir = testDir("truncated");
    writeSource(dir, 2500);
    const fs::path file = dir / kDocLengthsName;
    fs::resize_file(file, placeOf(file, "doc_lengths") + 100);
    const std::string error = errorOf([&] { SourceReader reader(dir, lazily()); });
    EXPECT_NE(error.find(file.string()), std::string::npos) << error;
    EXPECT_NE(error.find("truncated"), std::string::npos) << error;
}

// A failed write leaves no file, and no temporary: a corrupt shard stops it.
TEST(DocLengths, FailedWriteLeavesNothing) {
    const fs::path dir = testDir("failed");
    writeSource(dir, 300);
    fs::remove(dir / kDocLengthsName);
    fs::resize_file(dir / shardFileName(1), 100);
    const std::string error = errorOf([&] { writeDocLengths(dir, readManifest(dir)); });
    EXPECT_NE(error.find(shardFileName(1)), std::string::npos) << error;
    for (const auto& entry : fs::directory_iterator(dir))
        EXPECT_EQ(entry.path().filename().string().find("doc_lengths"), std::string::npos) << entry.path();
}

// Pass criterion: an index with other counts is refused when the source is
// opened; one with the same counts but other lengths (sound checksums) is
// refused by the first read of a block that holds a document it disagrees on,
// naming both files, before any token of it is used; kiln inspect names it too.
TEST(DocLengths, IndexOfAnotherPreparationIsRefused) {
    const fs::path a = testDir("a"), b = testDir("b");
    writeSource(a, 2500);
    writeSource(b, 2400);
    fs::copy_file(a / kDocLengthsName, b / kDocLengthsName, fs::copy_options::overwrite_existing);
    const std::string counts = errorOf([&] { SourceReader reader(b, lazily()); });
    EXPECT_NE(counts.find((b / kDocLengthsName).string()), std::string::npos) << counts;
    EXPECT_NE(counts.find("another preparation"), std::string::npos) << counts;

    // Documents 0 and 1 swapped (0 and 7 tokens), the group's checksum made anew: sound, and wrong.
    const auto expected = writeSource(b, 2400);
    ASSERT_NE(expected[0], expected[1]);
    const fs::path file = b / kDocLengthsName;
    std::uint32_t group[1024];
    {
        std::ifstream in(file, std::ios::binary);
        in.seekg(static_cast<std::streamoff>(placeOf(file, "doc_lengths")));
        in.read(reinterpret_cast<char*>(group), sizeof group);
    }
    std::swap(group[0], group[1]);
    overwrite(file, placeOf(file, "doc_lengths"), group);
    overwrite(file, placeOf(file, "doc_lengths_fletcher32"), fletcher32(std::as_bytes(std::span(group))));
    SourceReader reader(b, lazily());
    EXPECT_EQ(reader.documentLength(0), expected[1]) << "planning trusts a sound index";
    std::vector<std::uint32_t> tokens(61);
    const std::string disagree = errorOf([&] { reader.readTokens(1, 0, 1, tokens.data()); });
    EXPECT_NE(disagree.find(file.string()), std::string::npos) << disagree;
    // The block holding document 1 is checked whole when it is read: document 0 is named, the first that disagrees.
    EXPECT_NE(disagree.find("document 0 has 7 tokens there but 0 in"), std::string::npos) << disagree;
    EXPECT_NE(disagree.find(shardFileName(0)), std::string::npos) << disagree;
    SourceReader again(b, lazily());
    const auto report = verifySource(again);
    ASSERT_EQ(report.problems.size(), 1u);
    EXPECT_NE(report.problems[0].find("document 0 has 7 tokens there but 0"), std::string::npos) << report.problems[0];
}

TEST(DocLengths, WritingReplacesAtomically) {
    const fs::path dir = testDir("replaced");
    const auto expected = writeSource(dir, 300);
    writeDocLengths(dir, readManifest(dir));  // again, over the first
    SourceReader reader(dir, lazily());
    for (std::uint64_t d = 0; d < expected.size(); ++d) ASSERT_EQ(reader.documentLength(d), expected[d]);
    std::size_t files = 0;
    for (const auto& entry : fs::directory_iterator(dir))
        files += entry.path().filename().string().find("doc_lengths") != std::string::npos;
    EXPECT_EQ(files, 1u) << "no temporary left beside it";
}
