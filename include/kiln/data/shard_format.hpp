// The token shard format (documented in docs/formats.md).
//
//   /tokens        uint16 (vocabulary <= 65536) or uint32, 1-D, chunked, Fletcher-32 per chunk
//   /doc_offsets   uint64, n_docs+1, chunked, Fletcher-32 per chunk; document d is tokens[off[d], off[d+1])
//   attributes on the root group:
//     format ("kiln-token-shard"), format_version, source, tokenizer_id,
//     vocab_size, eos_id, token_bits (16|32), n_tokens, n_docs,
//     tokens_crc32, offsets_crc32 (zlib CRC-32 of the little-endian bytes)
//
// Documents are stored without EOS; the packer joins them with eos_id.
#pragma once

#include "kiln/data/tokenizer.hpp"

#include <hdf5.h>

#include <cstdint>
#include <string>

namespace kiln::data {

inline constexpr const char* kShardFormat = "kiln-token-shard";
// Version 2 adds the per-chunk checksums. Version 1 shards stay readable, but
// their reads are not verified (kiln says so once per source).
inline constexpr std::int64_t kShardFormatVersion = 2;
inline constexpr std::int64_t kOldestShardFormatVersion = 1;

// 64 Ki tokens per chunk: 128 KiB (uint16) or 256 KiB (uint32). A 2049-token
// sequence touches at most two chunks, so random reads stay cheap, and a
// sequential scan moves large blocks. No compression: token ids barely compress
// and random access must stay one read away. A corrupt chunk is named by its
// index: tokens [k * kTokenChunk, (k + 1) * kTokenChunk).
inline constexpr std::uint64_t kTokenChunk = 64 * 1024;
inline constexpr std::uint64_t kOffsetChunk = 8 * 1024;  // 64 KiB of offsets: the largest /doc_offsets chunk

// The chunks kiln prep writes: an eighth of the shard, at least 256 tokens,
// at most kBlockReadChunk, and larger again (up to kTokenChunk) only where a
// shard would otherwise have more than kMaxChunksAShard chunks.
// - HDF5 stores every chunk whole, the last one too: a shard of a few
//   thousand tokens in 64 Ki-token chunks took 190 KB on disk for 8 KB of
//   ids, so small shards get small chunks.
// - Large shards are read by the shuffle block (about 50 k tokens) in whole
//   chunks: 64 Ki-token chunks made a block read 2.3x its tokens, 16 Ki
//   about 1.3x (still 32 or 64 KiB a read).
// - HDF5 1.10 finds one chunk's place in time that grows with the chunk
//   count, so listing a shard's N chunks (the start-up check, the readers'
//   chunk lists) costs O(N^2): 0.2 ms for 92 chunks, 5 ms for 1024, 91 ms
//   for 4096. A 64 Mi-token shard keeps 64 Ki-token chunks (1024).
inline constexpr std::uint64_t kBlockReadChunk = 16 * 1024;
inline constexpr std::uint64_t kMaxChunksAShard = 512;
std::uint64_t tokenChunkFor(std::uint64_t shardTokens);

// The /doc_offsets chunks of a shard of `entries` offsets (documents + 1),
// known when they are written: a 64th of them, at least 256 (2 KiB), at most
// kOffsetChunk; one chunk when there are fewer. A shuffle block (64
// documents) reads the one or two chunks holding its 65 offsets: with chunks
// of 8 Ki entries a 64 Mi-token shard's block read 64 KiB of offsets beside
// its 128-256 KiB of tokens, and a rank without a slice, which reads offsets
// alone, read 125x what it used. At most 64 chunks keeps their index in
// HDF5's first B-tree node, so they stay back to back (read with preads).
inline constexpr std::uint64_t kMinOffsetChunk = 256;
inline constexpr std::uint64_t kMaxOffsetChunksAShard = 64;
std::uint64_t offsetChunkFor(std::uint64_t entries);

struct ShardHeader {
    std::string source;
    TokenizerInfo tokenizer;
    int tokenBits = 16;
    std::uint64_t numTokens = 0;
    std::uint64_t numDocs = 0;
    std::uint32_t tokensCrc = 0;
    std::uint32_t offsetsCrc = 0;
    std::int64_t formatVersion = kShardFormatVersion;  // as read; writers write the current one
};

// 16 when every id of the vocabulary fits in uint16, else 32.
int tokenBitsFor(std::uint32_t vocabSize);

void writeShardHeader(hid_t file, const ShardHeader& header);
// Reads and checks the format name and version; `context` names the file.
ShardHeader readShardHeader(hid_t file, const std::string& context);

}  // namespace kiln::data
