// Where a small shard's chunks lie in its file, so that the stream can read
// the shard with plain preads instead of opening it through HDF5.
//
// Why: an HDF5 file opening costs about 60-80 us (H5Fopen builds a metadata
// cache with two 512 KB tables and copies property lists; each dataset opening
// reads object headers), which for a shard of 15 k tokens is as long as
// reading its tokens: 100 k such shards streamed at half the speed of 1 k
// large ones. The places are learnt from HDF5 itself at the start-up check
// (which opens every shard once anyway), and every chunk read this way is
// verified against its stored Fletcher-32 checksum. On any doubt (a checksum
// that differs, a short read) the caller reads the shard through HDF5 again,
// which either succeeds or reports the corrupt chunk in its usual words: the
// fast path can make nothing pass that HDF5 would refuse, and refuses nothing.
#pragma once

#include "kiln/base/read_buffer.hpp"

#include <hdf5.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace kiln::data {

// A dataset's chunks stored back to back in chunk order from file offset `at`,
// each `chunkBytes` long (its elements and the 4-byte checksum after them).
// Kept for every shard read whole: 16 bytes a dataset.
struct ChunkRun {
    std::uint64_t at = 0;  // 0: not known (HDF5 never puts data at offset 0: the superblock is there)
    std::uint32_t chunkBytes = 0;
    std::uint32_t chunks = 0;
    bool known() const { return at != 0; }
};

struct ShardChunks {
    ChunkRun tokens, offsets;
    bool known() const { return tokens.known() && offsets.known(); }
};
static_assert(sizeof(ShardChunks) == 4 * sizeof(std::uint64_t), "shared between ranks as four 64-bit words a shard");

// A dataset's chunks wherever they lie (a shard written in pieces has index
// nodes between them), for the shards read a block at a time.
struct ChunkList {
    std::uint32_t chunkBytes = 0;
    std::vector<std::uint64_t> at;  // chunk k's file offset
};

// Where a dataset's chunks are, either way: what the reads below take.
struct ChunkPlaces {
    std::uint32_t chunkBytes = 0;
    std::uint64_t chunks = 0;
    std::uint64_t first = 0;                  // a run's start
    const std::uint64_t* list = nullptr;      // or each chunk's offset
    ChunkPlaces(const ChunkRun& run) : chunkBytes(run.chunkBytes), chunks(run.chunks), first(run.at) {}
    ChunkPlaces(const ChunkList& list) : chunkBytes(list.chunkBytes), chunks(list.at.size()), list(list.at.data()) {}
    std::uint64_t at(std::uint64_t k) const { return list ? list[k] : first + k * chunkBytes; }
};

// HDF5 1.10 finds one chunk's place in time that grows with the chunk count:
// listing N chunks costs O(N^2) (5 ms for 1024, 91 ms for 4096 here). Datasets
// of more chunks are read through HDF5, so that a shard's check stays cheap.
// Twice prep's largest aim: a shard ends after the document that reaches its
// aim, so prep's default shards (64 Mi tokens in 64 Ki-token chunks) have
// 1025 chunks; at a limit of 1024 every one of them was read through HDF5
// (3x slower than small shards with preads).
inline constexpr std::uint64_t kMaxListedChunks = 2048;

// The chunks of a 1-D dataset of `length` elements of `elementBytes` each,
// when it is chunked with the Fletcher-32 filter alone, applied to every
// chunk, stored little-endian, and in at most kMaxListedChunks chunks;
// nullopt otherwise (read through HDF5).
std::optional<ChunkList> chunkList(hid_t dataset, std::uint64_t length, std::size_t elementBytes,
                                   const std::string& context);
// The same when the chunks lie back to back in order.
std::optional<ChunkRun> contiguousChunks(hid_t dataset, std::uint64_t length, std::size_t elementBytes,
                                         const std::string& context);

// HDF5's Fletcher-32 of `bytes` (16-bit big-endian words summed with end-around
// carry, folded every 360 words), as its filter stores after each chunk.
std::uint32_t fletcher32(std::span<const std::byte> bytes);

// `bytes` bytes of `fd` from offset `at` into `into`, retrying short reads and
// interruptions; false on an error or the end of the file (truncated).
bool preadFully(int fd, void* into, std::size_t bytes, std::uint64_t at);

// Reads elements [from, from + count) of `elementBytes` each (2 or 4 for
// tokens, 8 for offsets) into `out` as 32-bit (tokens) or 64-bit (offsets)
// values, verifying every chunk it reads; adjacent chunks are read together.
// `fd` is the shard's file; `scratch` is reused (not zeroed as it grows). False on a short read or a
// checksum that differs: read through HDF5 then.
bool readChunks(int fd, const ChunkPlaces& places, std::size_t elementBytes, std::uint64_t from, std::uint64_t count,
                void* out, ReadBuffer<std::byte>& scratch);

}  // namespace kiln::data
