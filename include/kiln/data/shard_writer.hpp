// Writes one token shard, streaming: tokens go to disk a chunk at a time.
// The file is written under a ".partial" name and renamed only by finish(),
// so a crash or kill never leaves a shard that looks complete.
#pragma once

#include "kiln/data/shard_format.hpp"
#include "kiln/io/hdf5.hpp"

#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

namespace kiln::data {

struct ShardSummary {
    std::string file;  // file name within the source directory
    std::uint64_t numDocs = 0;
    std::uint64_t numTokens = 0;
    std::uint32_t tokensCrc = 0;
    std::uint32_t offsetsCrc = 0;
};

class ShardWriter {
public:
    // `header` gives source, tokenizer and token width; counts are filled in.
    // `chunkTokens`: the /tokens chunk (tokenChunkFor the shard size prep aims at).
    // `expectedTokens`: the size aimed at, or 0 when not known. A shard of more
    // than 32 chunks gets room for its chunk index reserved ahead for that many
    // tokens (fewer fit HDF5's own first metadata block), so that the chunks
    // lie back to back and a reader can pread them without asking HDF5 where
    // each one is (without it, HDF5 puts index nodes between chunks).
    ShardWriter(std::filesystem::path path, ShardHeader header, std::uint64_t chunkTokens = kTokenChunk,
                std::uint64_t expectedTokens = 0);
    ~ShardWriter();  // without finish(): removes the partial file
    ShardWriter(const ShardWriter&) = delete;
    ShardWriter& operator=(const ShardWriter&) = delete;

    // Appends one document (no EOS). Every id must be below the vocabulary size.
    void addDocument(std::span<const std::uint32_t> tokens);

    std::uint64_t numTokens() const { return header_.numTokens; }
    std::uint64_t numDocs() const { return header_.numDocs; }

    // Flushes, writes offsets and attributes, closes, renames into place.
    ShardSummary finish();

private:
    void flushTokens();

    std::filesystem::path path_, partial_;
    ShardHeader header_;
    io::h5::Handle file_, tokens_;
    std::vector<std::uint16_t> buffer16_;
    std::vector<std::uint32_t> buffer32_;
    std::vector<std::uint64_t> offsets_{0};
    std::uint64_t written_ = 0;
    bool finished_ = false;
};

}  // namespace kiln::data
