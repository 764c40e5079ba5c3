#include "kiln/data/shard_format.hpp"

#include "kiln/base/error.hpp"
#include "kiln/io/hdf5.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace kiln::data {

namespace h5 = io::h5;

int tokenBitsFor(std::uint32_t vocabSize) { return vocabSize <= 65536 ? 16 : 32; }

std::uint64_t tokenChunkFor(std::uint64_t shardTokens) {
    const std::uint64_t chunk = std::clamp<std::uint64_t>(shardTokens / 8, 256, kBlockReadChunk);
    if (shardTokens / chunk <= kMaxChunksAShard) return chunk;
    return std::min<std::uint64_t>((shardTokens + kMaxChunksAShard - 1) / kMaxChunksAShard, kTokenChunk);
}

std::uint64_t offsetChunkFor(std::uint64_t entries) {
    if (entries <= kMinOffsetChunk) return std::max<std::uint64_t>(entries, 1);
    const std::uint64_t chunk = (entries + kMaxOffsetChunksAShard - 1) / kMaxOffsetChunksAShard;
    return std::clamp<std::uint64_t>(chunk, kMinOffsetChunk, kOffsetChunk);
}

void writeShardHeader(hid_t file, const ShardHeader& header) {
    h5::writeAttribute(file, "format", std::string(kShardFormat));
    h5::writeAttribute(file, "format_version", kShardFormatVersion);
    h5::writeAttribute(file, "source", header.source);
    h5::writeAttribute(file, "tokenizer_id", header.tokenizer.id);
    h5::writeAttribute(file, "vocab_size", std::uint64_t{header.tokenizer.vocabSize});
    h5::writeAttribute(file, "eos_id", std::uint64_t{header.tokenizer.eosId});
    h5::writeAttribute(file, "token_bits", std::int64_t{header.tokenBits});
    h5::writeAttribute(file, "n_tokens", header.numTokens);
    h5::writeAttribute(file, "n_docs", header.numDocs);
    h5::writeAttribute(file, "tokens_crc32", std::uint64_t{header.tokensCrc});
    h5::writeAttribute(file, "offsets_crc32", std::uint64_t{header.offsetsCrc});
}

ShardHeader readShardHeader(hid_t file, const std::string& context) {
    const std::string format = h5::hasAttribute(file, "format") ? h5::readStringAttribute(file, "format", context) : "";
    if (format != kShardFormat)
        throw InputError(fmt::format("{}: not a kiln token shard (format attribute '{}', expected '{}')", context, format,
                                     kShardFormat),
                         ErrorScope::ThisRank);
    const auto version = h5::readIntAttribute(file, "format_version", context);
    if (version < kOldestShardFormatVersion || version > kShardFormatVersion)
        throw InputError(fmt::format("{}: shard format version {}, this kiln reads versions {} to {}; re-run kiln prep with "
                                     "this kiln, or use the kiln that wrote it",
                                     context, version, kOldestShardFormatVersion, kShardFormatVersion),
                         ErrorScope::ThisRank);
    ShardHeader h;
    h.formatVersion = version;
    h.source = h5::readStringAttribute(file, "source", context);
    h.tokenizer.id = h5::readStringAttribute(file, "tokenizer_id", context);
    h.tokenizer.vocabSize = static_cast<std::uint32_t>(h5::readUintAttribute(file, "vocab_size", context));
    h.tokenizer.eosId = static_cast<std::uint32_t>(h5::readUintAttribute(file, "eos_id", context));
    h.tokenBits = static_cast<int>(h5::readIntAttribute(file, "token_bits", context));
    h.numTokens = h5::readUintAttribute(file, "n_tokens", context);
    h.numDocs = h5::readUintAttribute(file, "n_docs", context);
    h.tokensCrc = static_cast<std::uint32_t>(h5::readUintAttribute(file, "tokens_crc32", context));
    h.offsetsCrc = static_cast<std::uint32_t>(h5::readUintAttribute(file, "offsets_crc32", context));
    if (h.tokenBits != 16 && h.tokenBits != 32)
        throw InputError(fmt::format("{}: token_bits is {}, expected 16 or 32", context, h.tokenBits), ErrorScope::ThisRank);
    return h;
}

}  // namespace kiln::data
