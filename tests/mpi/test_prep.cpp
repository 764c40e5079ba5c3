// kiln prep under MPI (2 ranks): documents in = documents out, whatever the
// rank count and the input format; every skipped record is counted with its
// location; an existing source is only replaced with --overwrite; --strict
// turns a skip into an error.
#include "kiln/base/error.hpp"
#include "kiln/data/prep.hpp"
#include "kiln/data/shard_writer.hpp"
#include "kiln/data/source_reader.hpp"
#include "kiln/data/source_verify.hpp"
#include "kiln/data/tokenizer.hpp"
#include "../support/shared_dir.hpp"

#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>

namespace fs = std::filesystem;
using namespace kiln::data;

namespace {

int worldRank() {
    int r = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}

// One directory per test, the same on every rank.
fs::path testDir(const std::string& name) {
    const fs::path dir = kiln::test::sharedScratch("kiln-prep") / name;
    if (worldRank() == 0) {
        fs::remove_all(dir);
        fs::create_directories(dir / "in");
    }
    MPI_Barrier(MPI_COMM_WORLD);
    return dir;
}

std::string documentText(unsigned i, std::mt19937& rng) {
    std::string text = "doc-" + std::to_string(i) + ":";
    const int words = 1 + static_cast<int>(rng() % 60);
    for (int w = 0; w < words; ++w) text += " w" + std::to_string(rng() % 1000) + (rng() % 9 == 0 ? "\n" : "");
    return text;
}

std::string jsonEscape(const std::string& s) {
    std::string out;
    for (char c : s) out += c == '\n' ? std::string("\\n") : c == '"' ? std::string("\\\"") : std::string(1, c);
    return out;
}

// All documents of a source, decoded, sorted.
std::vector<std::string> readBack(const fs::path& source) {
    SourceReader reader(source);
    const auto tokenizer = openTokenizer("bytes");
    std::vector<std::string> docs;
    for (std::uint64_t d = 0; d < reader.numDocuments(); ++d) docs.push_back(tokenizer->decode(reader.readDocument(d)));
    std::sort(docs.begin(), docs.end());
    return docs;
}

PrepOptions options(const fs::path& dir, const std::string& source, InputFormat format) {
    PrepOptions o;
    o.source = source;
    o.outDir = (dir / "out").string();
    o.inputs = {(dir / "in").string()};
    o.format = format;
    o.progress = false;
    return o;
}

}  // namespace

TEST(Prep, JsonLinesSplitAcrossRanksRoundTripsAndCountsBadRecords) {
    const fs::path dir = testDir("jsonl");
    std::vector<std::string> expected;
    if (worldRank() == 0) {
        std::mt19937 rng(3);
        std::ofstream out(dir / "in" / "big.jsonl");
        for (unsigned i = 0; i < 600; ++i) {
            const std::string text = documentText(i, rng);
            out << "{\"text\": \"" << jsonEscape(text) << "\", \"id\": " << i << "}\n";
            expected.push_back(text);
            if (i == 100) out << "this is not json\n";
            if (i == 200) out << "{\"body\": \"no text field\"}\n";
            if (i == 300) out << "{\"text\": \"\"}\n";
            if (i == 400) out << "{\"text\": \"latin1 \xe9t\xe9\"}\n";
            if (i == 500) out << "{\"text\": 42}\n";
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    auto o = options(dir, "web", InputFormat::JsonLines);
    o.splitBytes = 4096;  // many units: both ranks share the one file
    o.shardTokens = 8192;
    const auto summary = prepareSource(MPI_COMM_WORLD, o);
    const auto docs = readBack(dir / "out" / "web");
    if (worldRank() == 0) {
        std::sort(expected.begin(), expected.end());
        EXPECT_EQ(docs, expected);
        EXPECT_EQ(summary.documents, 600u);
        EXPECT_GT(summary.shards, 4u);
        ASSERT_EQ(summary.skipped.size(), 5u);
        EXPECT_EQ(summary.skipped.at("not JSON").count, 1u);
        EXPECT_EQ(summary.skipped.at("not JSON").examples.at(0), (dir / "in" / "big.jsonl").string() + ":102");
        EXPECT_EQ(summary.skipped.at("no field 'text'").count, 1u);
        EXPECT_EQ(summary.skipped.at("empty document").count, 1u);
        EXPECT_EQ(summary.skipped.at("invalid UTF-8").count, 1u);
        EXPECT_EQ(summary.skipped.at("field 'text' is not a string").count, 1u);
    }
    SourceReader reader(dir / "out" / "web");
    EXPECT_TRUE(verifySource(reader).ok());
}

TEST(Prep, SameDocumentsOnOneRankAsOnTwo) {
    const fs::path dir = testDir("ranks");
    if (worldRank() == 0) {
        std::mt19937 rng(5);
        for (int f = 0; f < 7; ++f) {
            std::ofstream out(dir / "in" / ("part" + std::to_string(f) + ".txt"));
            for (unsigned i = 0; i < 40; ++i) out << documentText(f * 100 + i, rng) << "\n\n\n";
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    prepareSource(MPI_COMM_WORLD, options(dir, "two", InputFormat::Blocks));
    MPI_Comm self;
    MPI_Comm_split(MPI_COMM_WORLD, worldRank(), 0, &self);
    if (worldRank() == 0) prepareSource(self, options(dir, "one", InputFormat::Blocks));
    MPI_Comm_free(&self);
    MPI_Barrier(MPI_COMM_WORLD);
    const auto two = readBack(dir / "out" / "two");
    const auto one = readBack(dir / "out" / "one");
    EXPECT_EQ(two.size(), 280u);
    EXPECT_EQ(one, two);
    // Prep writes the length index the ranks plan from (doc_lengths.hpp), in document order.
    ReaderOptions fromShards;
    fromShards.useLengthIndex = false;
    SourceReader reader(dir / "out" / "two", fromShards);
    DocLengths lengths(dir / "out" / "two" / kDocLengthsName, reader.manifest());
    for (std::uint64_t d = 0; d < reader.numDocuments(); ++d)
        ASSERT_EQ(lengths.length(d), reader.readDocument(d).size()) << "document " << d;
}

TEST(Prep, FilePerDocumentSkipsAndCountsEmptyFiles) {
    const fs::path dir = testDir("files");
    if (worldRank() == 0) {
        std::ofstream(dir / "in" / "a.txt") << "first document\nwith two lines\n";
        std::ofstream(dir / "in" / "b.txt") << "  \n\n";
        std::ofstream(dir / "in" / "c.txt") << "third";
    }
    MPI_Barrier(MPI_COMM_WORLD);
    const auto summary = prepareSource(MPI_COMM_WORLD, options(dir, "files", InputFormat::FilePerDocument));
    const auto docs = readBack(dir / "out" / "files");
    EXPECT_EQ(docs, (std::vector<std::string>{"first document\nwith two lines\n", "third"}));
    if (worldRank() == 0) {
        EXPECT_EQ(summary.skipped.at("empty document").examples.at(0), (dir / "in" / "b.txt").string());
    }
}

TEST(Prep, ExistingSourceNeedsOverwriteAndIsReplacedWhole) {
    const fs::path dir = testDir("overwrite");
    if (worldRank() == 0) std::ofstream(dir / "in" / "a.txt") << "version one";
    MPI_Barrier(MPI_COMM_WORLD);
    auto o = options(dir, "s", InputFormat::FilePerDocument);
    prepareSource(MPI_COMM_WORLD, o);
    if (worldRank() == 0) std::ofstream(dir / "in" / "a.txt") << "version two";
    MPI_Barrier(MPI_COMM_WORLD);
    try {
        prepareSource(MPI_COMM_WORLD, o);
        FAIL() << "no error";
    } catch (const kiln::InputError& e) {
        EXPECT_NE(std::string(e.what()).find("exists already; pass --overwrite"), std::string::npos) << e.what();
    }
    EXPECT_EQ(readBack(dir / "out" / "s"), std::vector<std::string>{"version one"});
    o.overwrite = true;
    prepareSource(MPI_COMM_WORLD, o);
    EXPECT_EQ(readBack(dir / "out" / "s"), std::vector<std::string>{"version two"});
    MPI_Barrier(MPI_COMM_WORLD);
    EXPECT_FALSE(fs::exists(dir / "out" / ".s.staging"));
    EXPECT_FALSE(fs::exists(dir / "out" / ".s.old"));
}

TEST(Prep, BadInputsAreNamed) {
    const fs::path dir = testDir("bad");
    auto o = options(dir, "s", InputFormat::JsonLines);
    o.inputs = {(dir / "in" / "missing.jsonl").string()};
    try {
        prepareSource(MPI_COMM_WORLD, o);
        FAIL() << "no error";
    } catch (const kiln::InputError& e) {
        EXPECT_NE(std::string(e.what()).find("missing.jsonl': no such file or directory"), std::string::npos) << e.what();
    }
    o.inputs = {(dir / "in").string()};
    if (worldRank() == 0) std::ofstream(dir / "in" / "only-bad.jsonl") << "nope\n{\"text\": \"\"}\n";
    MPI_Barrier(MPI_COMM_WORLD);
    try {
        prepareSource(MPI_COMM_WORLD, o);
        FAIL() << "no error";
    } catch (const kiln::InputError& e) {
        EXPECT_NE(std::string(e.what()).find("no documents in the inputs"), std::string::npos) << e.what();
    }
    EXPECT_FALSE(fs::exists(dir / "out" / "s"));
    o.tokenBits = 8;
    EXPECT_THROW(prepareSource(MPI_COMM_WORLD, o), kiln::InputError);
}

// Pass criterion: the length index written by ranks that each hold any share
// of the shards (none, one shard inside a group, all of them) is the one a
// single process writes, byte for byte in what it lists, every group's
// checksum sound (DocLengths verifies each group it reads).
TEST(Prep, LengthIndexIsTheSameWhateverTheRanksShares) {
    const fs::path dir = testDir("lengths");
    const TokenizerInfo tokenizer{"test-tokenizer", 500, 499};
    SourceManifest manifest{"lengths", tokenizer, 16, {}};
    std::vector<std::uint64_t> expected;
    if (worldRank() == 0) {
        std::mt19937 rng(3);
        for (int s = 0; s < 9; ++s) {
            // Shards of 1 to 900 documents: some end inside a group, some span several.
            ShardWriter writer(dir / shardFileName(s), ShardHeader{"lengths", tokenizer, 16});
            const std::size_t docs = s == 4 ? 1 : 100 + rng() % 800;
            for (std::size_t d = 0; d < docs; ++d) writer.addDocument(std::vector<std::uint32_t>(rng() % 40, 7));
            manifest.shards.push_back(writer.finish());
        }
        writeManifest(dir, manifest);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    manifest = readManifest(dir);
    ReaderOptions fromShards;
    fromShards.useLengthIndex = false;
    SourceReader reader(dir, fromShards);
    for (std::uint64_t d = 0; d < reader.numDocuments(); ++d) expected.push_back(reader.documentLength(d));
    const std::size_t n = manifest.shards.size();
    for (const std::size_t split : {std::size_t{0}, std::size_t{1}, std::size_t{4}, std::size_t{5}, n - 1, n}) {
        // Rank 0 writes shards [0, split), rank 1 the rest.
        std::vector<LengthsShard> mine;
        std::uint64_t firstDoc = 0;
        for (std::size_t s = 0; s < n; ++s) {
            if ((s < split) == (worldRank() == 0))
                mine.push_back({dir / manifest.shards.file(s), manifest.shards.numDocs(s), manifest.shards.numTokens(s)});
            else if (worldRank() == 1 && s < split)
                firstDoc += manifest.shards.numDocs(s);
        }
        const fs::path path = dir / ("split-" + std::to_string(split) + ".h5");
        writeDocLengths(MPI_COMM_WORLD, path, {"lengths", manifest.numDocs(), manifest.numTokens()}, mine, firstDoc);
        DocLengths lengths(path, manifest);
        for (std::uint64_t d = 0; d < expected.size(); ++d)
            ASSERT_EQ(lengths.length(d), expected[d]) << "document " << d << ", split at shard " << split;
    }
}
