// Reading shards with preads at the places HDF5 reports for their chunks:
// the values are those HDF5 reads, the checksum is HDF5's, and damage or
// truncation after the start-up check still ends in HDF5's own error naming
// the shard and the chunk.
#include "kiln/base/error.hpp"
#include "kiln/data/shard_chunks.hpp"
#include "kiln/data/shard_table.hpp"
#include "kiln/data/shard_writer.hpp"
#include "kiln/data/source_manifest.hpp"
#include "kiln/data/source_reader.hpp"

#include "../support/error_text.hpp"
#include "../support/stored_bit.hpp"

#include <fcntl.h>
#include "../support/scratch_dir.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

namespace fs = std::filesystem;
using namespace kiln::data;
using kiln::test::errorOf;

namespace {

fs::path scratch(const std::string& name) {
    const fs::path dir = kiln::test::processScratch("kiln-chunks") / name;
    fs::remove_all(dir);
    fs::create_directories(dir);
    return dir;
}

struct Source {
    fs::path dir;
    std::vector<std::vector<std::uint32_t>> docs;
    SourceManifest manifest;
};

// `shards` shards of `docsPerShard` random documents of 1-`maxDoc` tokens, in chunks of `chunk` tokens,
// written as prep writes shards aimed at `expectedTokens` (0: not known, as by older kiln prep).
Source writeSource(const std::string& name, std::uint32_t vocab, std::size_t shards, std::size_t docsPerShard,
                   std::size_t maxDoc, std::uint64_t chunk, std::uint64_t expectedTokens = 0) {
    Source s;
    s.dir = scratch(name);
    const TokenizerInfo tokenizer{"test-tokenizer", vocab, vocab - 1};
    s.manifest = {name, tokenizer, tokenBitsFor(vocab), {}};
    std::mt19937_64 rng(11);
    for (std::size_t k = 0; k < shards; ++k) {
        ShardWriter writer(s.dir / shardFileName(k), ShardHeader{name, tokenizer, tokenBitsFor(vocab)}, chunk, expectedTokens);
        for (std::size_t d = 0; d < docsPerShard; ++d) {
            std::vector<std::uint32_t> doc(1 + rng() % maxDoc);
            for (auto& t : doc) t = static_cast<std::uint32_t>(rng() % vocab);
            writer.addDocument(doc);
            s.docs.push_back(std::move(doc));
        }
        s.manifest.shards.push_back(writer.finish());
    }
    writeManifest(s.dir, s.manifest);
    return s;
}

// The tokens of one shard as the source's documents hold them.
std::vector<std::uint32_t> shardTokens(const Source& s, std::size_t shard) {
    std::vector<std::uint32_t> tokens;
    const std::uint64_t first = s.manifest.shards.docStarts()[shard], end = s.manifest.shards.docStarts()[shard + 1];
    for (std::uint64_t d = first; d < end; ++d) tokens.insert(tokens.end(), s.docs[d].begin(), s.docs[d].end());
    return tokens;
}

}  // namespace

// Pass criterion: for both token widths and for a shard written in several
// pieces (chunks not back to back), any range read with preads at the places
// HDF5 reports is the range written, every chunk's checksum agreeing with the
// one HDF5 stored; a run of back-to-back chunks is recognised only as such.
TEST(ShardChunks, PreadsReadWhatWasWritten) {
    for (const std::uint32_t vocab : {1000u, 100000u}) {
        // About 200 k tokens in chunks of 1 Ki: the writer appends 64 Ki tokens
        // at a time, and the chunk index grows nodes between some chunks.
        const auto s = writeSource(vocab > 65536 ? "wide" : "narrow", vocab, 1, 1500, 260, 1024);
        const auto written = shardTokens(s, 0);
        const fs::path path = s.dir / shardFileName(0);
        hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
        hid_t tokens = H5Dopen2(file, "tokens", H5P_DEFAULT), offsets = H5Dopen2(file, "doc_offsets", H5P_DEFAULT);
        const std::size_t width = s.manifest.tokenBits / 8;
        const auto list = chunkList(tokens, written.size(), width, path.string());
        const auto offsetList = chunkList(offsets, 1501, sizeof(std::uint64_t), path.string());
        ASSERT_TRUE(list && offsetList);
        EXPECT_EQ(list->at.size(), (written.size() + 1023) / 1024);
        EXPECT_FALSE(contiguousChunks(tokens, written.size(), width, path.string())) << "written in pieces";
        EXPECT_FALSE(chunkList(tokens, written.size(), width == 2 ? 4 : 2, path.string())) << "the stored width only";
        H5Dclose(tokens);
        H5Dclose(offsets);
        H5Fclose(file);

        const int fd = ::open(path.c_str(), O_RDONLY);
        ASSERT_GE(fd, 0);
        kiln::ReadBuffer<std::byte> buffer;
        std::mt19937_64 rng(3);
        for (int trial = 0; trial < 300; ++trial) {
            const std::uint64_t from = rng() % written.size(), count = rng() % std::min<std::uint64_t>(20000, written.size() - from);
            std::vector<std::uint32_t> out(count);
            ASSERT_TRUE(readChunks(fd, *list, width, from, count, out.data(), buffer)) << from << " " << count;
            ASSERT_TRUE(std::equal(out.begin(), out.end(), written.begin() + static_cast<std::ptrdiff_t>(from)));
        }
        std::vector<std::uint64_t> bounds(1501);
        ASSERT_TRUE(readChunks(fd, *offsetList, sizeof(std::uint64_t), 0, bounds.size(), bounds.data(), buffer));
        EXPECT_EQ(bounds.front(), 0u);
        EXPECT_EQ(bounds.back(), written.size());
        std::vector<std::uint32_t> past(10);
        EXPECT_FALSE(readChunks(fd, *list, width, list->at.size() * 1024, 10, past.data(), buffer)) << "past the last chunk";
        ::close(fd);
    }
}

// Pass criterion: fletcher32 equals what HDF5's filter stores, for chunks of
// even and odd byte counts (an odd last byte is the high half of a word), of
// more than one block of its sums, and at the edges of its arithmetic: all
// zero (sums 0), all 0xff (sums that are multiples of 65535), and zeros but
// for one byte (late, or the odd last one: sums that were 0 and are not).
TEST(ShardChunks, Fletcher32IsHdf5s) {
    const fs::path path = scratch("fletcher") / "bytes.h5";
    std::mt19937 rng(5);
    // Short buffers for the tiny chunks: at most kMaxListedChunks chunks are listed.
    std::vector<std::uint8_t> random(3 * 8192 + 63), shortRandom(4003), zeros(4096, 0), ones(4096 * 3, 0xff),
        lastOdd(2 * 8192 + 1, 0), late(2 * 8192, 0);
    lastOdd.back() = 1;
    late[2 * 8192 - 37] = 0xff;
    for (auto& b : random) b = static_cast<std::uint8_t>(rng());
    for (auto& b : shortRandom) b = static_cast<std::uint8_t>(rng());
    struct Case {
        const std::vector<std::uint8_t>& bytes;
        hsize_t chunk;
    };
    for (const Case& c : {Case{shortRandom, 7}, Case{shortRandom, 8}, Case{random, 63}, Case{random, 3 * 8192 + 63},
                          Case{zeros, 4096}, Case{zeros, 7}, Case{ones, 4096 * 3}, Case{ones, 65535 * 2 / 16}, Case{ones, 27},
                          Case{lastOdd, 2 * 8192 + 1}, Case{late, 2 * 8192}, Case{late, 8191}}) {
        const auto& bytes = c.bytes;
        const hsize_t chunk = c.chunk;
        hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
        hsize_t dims[1] = {bytes.size()};
        hid_t space = H5Screate_simple(1, dims, nullptr), props = H5Pcreate(H5P_DATASET_CREATE);
        H5Pset_chunk(props, 1, &chunk);
        H5Pset_fletcher32(props);
        hid_t set = H5Dcreate2(file, "bytes", H5T_STD_U8LE, space, H5P_DEFAULT, props, H5P_DEFAULT);
        H5Dwrite(set, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes.data());
        H5Fflush(file, H5F_SCOPE_GLOBAL);
        const auto list = chunkList(set, bytes.size(), 1, path.string());
        ASSERT_TRUE(list);
        H5Dclose(set);
        H5Pclose(props);
        H5Sclose(space);
        H5Fclose(file);
        const int fd = ::open(path.c_str(), O_RDONLY);
        kiln::ReadBuffer<std::byte> buffer;
        std::vector<std::uint8_t> out(bytes.size());
        EXPECT_TRUE(readChunks(fd, *list, 1, 0, bytes.size(), out.data(), buffer)) << "chunks of " << chunk << " bytes";
        EXPECT_EQ(out, bytes);
        ::close(fd);
    }
}

// Pass criterion: a source of small shards is read with preads after the
// start-up check (no HDF5 opening while streaming), one reading per piece of
// a shuffle block, documents intact; with the table over its memory bound,
// through HDF5, documents intact.
TEST(ShardChunks, SmallShardsStreamWithoutHdf5Openings) {
    const auto s = writeSource("small", 1000, 12, 20, 200, 256);
    SourceReader reader(s.dir);
    EXPECT_EQ(reader.shardChunks().size(), 12u);
    for (const auto& places : reader.shardChunks()) EXPECT_TRUE(places.known());
    const std::uint64_t checks = reader.shardOpenings();
    for (std::size_t d = 0; d < s.docs.size(); ++d) ASSERT_EQ(reader.readDocument(d), s.docs[d]) << d;
    const std::uint64_t pieces = 12 + 3;  // 20-document shards; blocks of 64 end inside shards 3, 6 and 9
    EXPECT_EQ(reader.blocksInMemory(), pieces);
    EXPECT_EQ(reader.directReads(), pieces);
    EXPECT_EQ(reader.shardOpenings() - checks, pieces);

    // A table over its bound is not kept: the same documents through HDF5.
    ReaderOptions bounded;
    bounded.chunkTableBytes = 11 * sizeof(ShardChunks);
    SourceReader hdf5(s.dir, bounded);
    EXPECT_TRUE(hdf5.shardChunks().empty());
    for (std::size_t d = 0; d < s.docs.size(); ++d) ASSERT_EQ(hdf5.readDocument(d), s.docs[d]) << d;
    EXPECT_EQ(hdf5.directReads(), 0u);
}

// Pass criterion: damage to a small shard after the check (when its places
// are already known) ends in HDF5's error naming the shard and the chunk,
// never in wrong tokens; so does a truncation.
TEST(ShardChunks, DamageAfterTheCheckIsNamedByHdf5) {
    const auto s = writeSource("damaged", 1000, 4, 20, 200, 256);
    SourceReader reader(s.dir);
    kiln::test::flipStoredBit(s.dir / shardFileName(2), 1, 33);
    const std::uint64_t doc = s.manifest.shards.docStarts()[2];
    const std::string error = errorOf([&] { reader.readDocument(doc); });
    EXPECT_NE(error.find(shardFileName(2)), std::string::npos) << error;
    EXPECT_NE(error.find("in chunk 1"), std::string::npos) << error;
    EXPECT_EQ(reader.directReads(), 0u);

    SourceReader again(s.dir);
    fs::resize_file(s.dir / shardFileName(3), fs::file_size(s.dir / shardFileName(3)) / 2);
    const std::string truncated = errorOf([&] { again.readDocument(s.manifest.shards.docStarts()[3]); });
    EXPECT_NE(truncated.find(shardFileName(3)), std::string::npos) << truncated;
    EXPECT_FALSE(truncated.empty());
    EXPECT_EQ(again.readDocument(0), s.docs[0]) << "the other shards still read";
}

// Pass criterion: shards read by the block whose chunks lie back to back (one
// piece: below 64 Ki tokens) are read with preads from their first block on.
TEST(ShardChunks, BlocksOfShardsInOnePieceAreReadWithPreads) {
    const auto s = writeSource("pieces", 1000, 4, 300, 100, 1024);  // 300 documents a shard: read by the block
    ReaderOptions options;
    options.blockDocs = 64;
    SourceReader reader(s.dir, options);
    ASSERT_EQ(reader.shardChunks().size(), 4u);
    for (const auto& places : reader.shardChunks()) EXPECT_TRUE(places.known());
    const std::uint64_t checks = reader.shardOpenings();
    for (std::size_t d = 0; d < s.docs.size(); ++d) ASSERT_EQ(reader.readDocument(d), s.docs[d]) << d;
    EXPECT_EQ(reader.shardsInMemory(), 0u) << "not held whole";
    const std::uint64_t pieces = reader.blocksInMemory();  // (shard, block) pieces; the budget holds them all
    EXPECT_GE(pieces, 4u * 300 / 64);
    EXPECT_EQ(reader.shardOpenings() - checks, pieces);
    EXPECT_EQ(reader.directReads(), pieces);
}

// Pass criterion: a large shard read by the block (chunks not back to back)
// opens its file through HDF5 for its first two blocks (the chunk list is
// looked up at the second), its later blocks with preads; damage under a
// later block is named by HDF5 with its chunk.
TEST(ShardChunks, LaterBlocksOfAShardAreReadWithPreads) {
    const auto s = writeSource("blocks", 1000, 1, 2000, 100, 1024);
    ReaderOptions options;
    options.blockDocs = 64;
    SourceReader reader(s.dir, options);
    ASSERT_TRUE(reader.shardChunks().empty()) << "written in pieces: its chunks are not back to back";
    const std::uint64_t checks = reader.shardOpenings();
    for (std::uint64_t d = 0; d < 640; ++d) ASSERT_EQ(reader.readDocument(d), s.docs[d]) << d;
    EXPECT_EQ(reader.shardOpenings() - checks, 10u) << "ten blocks";
    EXPECT_EQ(reader.directReads(), 8u) << "all but the first two with preads (the list is looked up at the second)";

    // A chunk well past what was read: under a block not yet held.
    const std::uint64_t doc = 1800, chunk = [&] {
        std::uint64_t tokens = 0;
        for (std::uint64_t d = 0; d < doc; ++d) tokens += s.docs[d].size();
        return tokens / 1024;
    }();
    kiln::test::flipStoredBit(s.dir / shardFileName(0), chunk, 5);
    const std::string error = errorOf([&] { reader.readDocument(doc); });
    EXPECT_NE(error.find(shardFileName(0)), std::string::npos) << error;
    EXPECT_NE(error.find("in chunk " + std::to_string(chunk)), std::string::npos) << error;
}

// Pass criterion: large shards written knowing the size aimed at (as kiln prep
// writes them) have all their chunks back to back although they are written
// in pieces, so the start-up check notes their places and every block is read
// with preads (offsets too, in chunks sized to them); the room reserved for
// the index costs under 1 % of the file.
// Three sizes: ~30 chunks (no room reserved: the index fits HDF5's first
// metadata block), ~100 chunks of 1 Ki tokens (index nodes would split them),
// and ~20 of 64 Ki (more than HDF5's 1 MiB chunk cache holds: chunks still
// cached when the offsets are written would be placed after them).
TEST(ShardChunks, ShardsWrittenWithTheirAimLieInOnePiece) {
    struct Case {
        const char* name;
        std::size_t docs, maxDoc;
        std::uint64_t chunk, aim, minChunks;
    };
    for (const Case& c : {Case{"aimed-few-chunks", 600, 100, 1024, 30000, 25}, Case{"aimed-small-chunks", 2000, 100, 1024, 100000, 90},
                          Case{"aimed-large-chunks", 2500, 1000, 65536, 1250000, 18}}) {
        const auto s = writeSource(c.name, 1000, 2, c.docs, c.maxDoc, c.chunk, c.aim);
        ReaderOptions options;
        options.blockDocs = 64;
        SourceReader reader(s.dir, options);
        ASSERT_EQ(reader.shardChunks().size(), 2u) << c.name;
        for (const auto& places : reader.shardChunks()) {
            EXPECT_TRUE(places.known()) << c.name;
            EXPECT_GE(places.tokens.chunks, c.minChunks) << c.name;
            EXPECT_GE(places.offsets.chunks, 2u) << c.name << ": offsets in chunks sized to them, back to back too";
        }
        const std::uint64_t checks = reader.shardOpenings();
        for (std::size_t d = 0; d < s.docs.size(); ++d) ASSERT_EQ(reader.readDocument(d), s.docs[d]) << c.name << " " << d;
        EXPECT_GE(reader.directReads(), 2u * c.docs / 64) << c.name;
        EXPECT_EQ(reader.shardOpenings() - checks, reader.directReads()) << c.name << ": every block with preads";
        for (std::size_t k = 0; k < 2; ++k) {
            const auto& shard = s.manifest.shards;
            const std::uint64_t docs = shard.docStarts()[k + 1] - shard.docStarts()[k];
            const std::uint64_t tokens = shardTokens(s, k).size(), chunks = (tokens + c.chunk - 1) / c.chunk;
            const std::uint64_t offsetChunk = offsetChunkFor(docs + 1), offsetChunks = (docs + offsetChunk) / offsetChunk;
            // Chunks are stored whole, each with its checksum.
            const double payload = chunks * (2.0 * c.chunk + 4) + offsetChunks * (8.0 * offsetChunk + 4);
            // The room reserved (none for few chunks), then HDF5's own metadata: two datasets, the attributes.
            const double room = (c.aim / c.chunk > 32 ? 8192 + 64.0 * (c.aim / c.chunk + 1) : 0.0) + 12288;
            EXPECT_LT(static_cast<double>(fs::file_size(s.dir / shardFileName(k))), payload + room + 0.01 * payload)
                << c.name << " " << k;
        }
    }
}

// Pass criterion: a shard written as prep writes its default shards, ending
// after the document that reaches its aim of 1024 chunks (so a few more),
// is in the start-up table and read with preads, documents intact.
TEST(ShardChunks, ShardsJustOverTheirAimAreReadWithPreads) {
    const auto s = writeSource("just-over", 1000, 1, 2700, 200, 256, 1024 * 256);
    ASSERT_GT(shardTokens(s, 0).size() / 256, 1024u);
    ReaderOptions options;
    options.blockDocs = 64;
    SourceReader reader(s.dir, options);
    ASSERT_EQ(reader.shardChunks().size(), 1u);
    EXPECT_TRUE(reader.shardChunks()[0].known());
    const std::uint64_t checks = reader.shardOpenings();
    for (std::size_t d = 0; d < s.docs.size(); ++d) ASSERT_EQ(reader.readDocument(d), s.docs[d]) << d;
    EXPECT_GE(reader.directReads(), s.docs.size() / 64);
    EXPECT_EQ(reader.shardOpenings() - checks, reader.directReads()) << "every block with preads";
}

// Pass criterion: a shard of more chunks than kMaxListedChunks (whose list
// HDF5 1.10 would take O(N^2) lookups to give) is neither in the start-up
// table nor given a chunk list: it is read through HDF5, documents intact.
TEST(ShardChunks, ShardsOfVeryManyChunksAreReadThroughHdf5) {
    // About 600 k tokens in chunks of 256: some 2340 chunks.
    const auto s = writeSource("many-chunks", 1000, 1, 6000, 200, 256, 600000);
    ASSERT_GT(shardTokens(s, 0).size() / 256, kMaxListedChunks);
    ReaderOptions options;
    options.blockDocs = 64;
    SourceReader reader(s.dir, options);
    EXPECT_TRUE(reader.shardChunks().empty());
    for (std::size_t d = 0; d < s.docs.size(); ++d) ASSERT_EQ(reader.readDocument(d), s.docs[d]) << d;
    EXPECT_EQ(reader.directReads(), 0u);
}
