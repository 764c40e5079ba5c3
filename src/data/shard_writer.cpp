#include "kiln/data/shard_writer.hpp"

#include "kiln/base/error.hpp"
#include "kiln/io/atomic_file.hpp"
#include "kiln/io/hdf5_array.hpp"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>

namespace kiln::data {

namespace h5 = io::h5;

namespace {

std::uint32_t crcUpdate(std::uint32_t crc, const void* data, std::size_t bytes) {
    // zlib's crc32 takes uInt lengths: feed it in pieces below 4 GiB.
    const auto* p = static_cast<const Bytef*>(data);
    while (bytes > 0) {
        const auto n = static_cast<uInt>(std::min<std::size_t>(bytes, 1u << 30));
        crc = static_cast<std::uint32_t>(crc32(crc, p, n));
        p += n;
        bytes -= n;
    }
    return crc;
}

// HDF5 takes room for metadata (chunk index nodes, object headers) in blocks
// of 2 KiB by default; each new block lands after the chunks written so far,
// which splits a shard's chunks into runs once its index outgrows the first
// (a 10 M-token shard of 153 chunks had two gaps). One block big enough for
// the whole shard's index keeps them in one run. A chunk costs under 40 bytes
// of index (measured: 41 KB for 1024 chunks); 64 leaves room for a shard that
// ends one long document past its aim. The unused rest is lost inside the
// file, so shards of few chunks, whose index fits HDF5's own first block,
// reserve nothing (reserving 12 KiB cost 100 k shards of 15 k tokens 9 % of
// their disk).
constexpr std::uint64_t kChunksWithoutRoom = 32;

// 0: HDF5's default.
std::uint64_t metadataRoomFor(std::uint64_t expectedTokens, std::uint64_t chunkTokens) {
    const std::uint64_t chunks = (expectedTokens + chunkTokens - 1) / chunkTokens;
    return chunks <= kChunksWithoutRoom ? 0 : 8192 + 64 * chunks;
}


}  // namespace

ShardWriter::ShardWriter(std::filesystem::path path, ShardHeader header, std::uint64_t chunkTokens,
                         std::uint64_t expectedTokens)
    : path_(std::move(path)), partial_(path_.string() + ".partial"), header_(std::move(header)) {
    h5::quietErrors();
    header_.numTokens = header_.numDocs = 0;
    header_.tokensCrc = header_.offsetsCrc = 0;
    const std::string context = partial_.string();
    file_ = h5::createFile(context, context, metadataRoomFor(expectedTokens, chunkTokens));
    // Every chunk carries a Fletcher-32 checksum that HDF5 verifies on every read: a flipped bit can never reach
    // the model (format version 2).
    tokens_ = h5::createGrowingArray(file_, "tokens", header_.tokenBits == 16 ? h5::fileType<std::uint16_t>() : h5::fileType<std::uint32_t>(),
                              chunkTokens, context);
}

ShardWriter::~ShardWriter() {
    if (finished_) return;
    tokens_.reset();
    file_.reset();
    std::error_code ignored;
    std::filesystem::remove(partial_, ignored);
}

void ShardWriter::addDocument(std::span<const std::uint32_t> tokens) {
    const std::uint32_t vocab = header_.tokenizer.vocabSize;
    for (const auto t : tokens) {
        if (t >= vocab)
            throw Error(fmt::format("{}: token id {} is not below the vocabulary size {} of tokenizer {}", partial_.string(),
                                    t, vocab, header_.tokenizer.id),
                        ErrorScope::ThisRank);
        if (header_.tokenBits == 16) {
            buffer16_.push_back(static_cast<std::uint16_t>(t));
        } else {
            buffer32_.push_back(t);
        }
        if (buffer16_.size() + buffer32_.size() == kTokenChunk) flushTokens();
    }
    header_.numTokens += tokens.size();
    header_.numDocs += 1;
    offsets_.push_back(header_.numTokens);
}

void ShardWriter::flushTokens() {
    const std::string context = partial_.string();
    if (header_.tokenBits == 16 && !buffer16_.empty()) {
        h5::appendBlock(tokens_, h5::memoryType<std::uint16_t>(), written_, buffer16_.size(), buffer16_.data(), context);
        header_.tokensCrc = crcUpdate(header_.tokensCrc, buffer16_.data(), buffer16_.size() * 2);
        written_ += buffer16_.size();
        buffer16_.clear();
    } else if (header_.tokenBits == 32 && !buffer32_.empty()) {
        h5::appendBlock(tokens_, h5::memoryType<std::uint32_t>(), written_, buffer32_.size(), buffer32_.data(), context);
        header_.tokensCrc = crcUpdate(header_.tokensCrc, buffer32_.data(), buffer32_.size() * 4);
        written_ += buffer32_.size();
        buffer32_.clear();
    }
}

ShardSummary ShardWriter::finish() {
    const std::string context = partial_.string();
    flushTokens();
    // HDF5 places a chunk in the file only when its chunk cache lets it go:
    // flushed now, the last token chunks lie before the offsets, not after.
    h5::flushDataset(tokens_, context);
    // Written once, whole, so their count is known: chunks sized to it.
    auto offsets = h5::createGrowingArray(file_, "doc_offsets", h5::fileType<std::uint64_t>(), offsetChunkFor(offsets_.size()), context);
    h5::appendBlock(offsets, h5::memoryType<std::uint64_t>(), 0, offsets_.size(), offsets_.data(), context);
    header_.offsetsCrc = crcUpdate(0, offsets_.data(), offsets_.size() * sizeof(std::uint64_t));
    writeShardHeader(file_, header_);
    offsets.reset();
    tokens_.reset();
    h5::flush(file_, context);
    file_.reset();
    io::commitTemporary(partial_, path_);
    finished_ = true;
    return {path_.filename().string(), header_.numDocs, header_.numTokens, header_.tokensCrc, header_.offsetsCrc};
}

}  // namespace kiln::data
