// What a SourceReader holds of a shard, shared by the files that implement
// it (source_reader.cpp: HDF5 reads and what is held; source_reader_preads.cpp:
// the reads that bypass HDF5's opening).
#pragma once

#include "kiln/base/read_buffer.hpp"
#include "kiln/data/source_reader.hpp"

namespace kiln::data {

struct SourceReader::OpenShard {
    // Without shuffle blocks, or for raw access, a small shard is held whole
    // (inMemory, its file closed); a large one is read through HDF5.
    bool inMemory = false;
    ReadBuffer<std::uint32_t> tokenData;  // filled by the read that follows: not zeroed first
    ReadBuffer<std::uint64_t> offsetData;
    io::h5::Handle file, tokens, offsets;
    io::h5::Handle tokenSpace, offsetSpace, memSpace;  // reused: creating them costs more than the read
    std::vector<std::uint64_t> offsetBlock;
    std::uint64_t offsetBlockStart = ~std::uint64_t{0};
    std::uint64_t lastUse = 0;  // the reader's use count when it was last used: the least recent goes first
    std::list<Held>::iterator heldAt;  // in held_, while inMemory
};

struct SourceReader::HeldBlock {
    std::size_t shard = 0;
    std::uint64_t firstDoc = 0;            // within the shard
    std::uint64_t sourceFirstDoc = 0;      // the same document's number in the source
    ReadBuffer<std::uint64_t> offsets;     // its documents' bounds in the shard: documents + 1 values
    ReadBuffer<std::uint32_t> tokens;      // the shard's tokens [offsets.front(), offsets.back())
    bool tokensRead = false;               // with ReaderOptions::blockTokensOnDemand, read at their first use
    std::list<Held>::iterator heldAt;
    std::uint64_t bytes() const { return offsets.size() * sizeof(std::uint64_t) + tokens.size() * sizeof(std::uint32_t); }
};

}  // namespace kiln::data
