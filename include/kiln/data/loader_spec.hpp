// What the loader needs from the deck, in one value.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace kiln::config {
class Deck;
}

namespace kiln::data {

struct SourceSpec {
    std::string name;
    std::filesystem::path dir;
    double weight = 0.0;
};

struct LoaderSpec {
    std::vector<SourceSpec> sources;  // deck order; order breaks ties in the mix schedule
    std::uint64_t seqLen = 256;       // a sample holds seqLen + 1 tokens; consecutive samples overlap by one
    std::uint64_t globalBatch = 32;   // samples per step
    std::uint64_t seed = 1234;
    std::uint64_t blockDocs = 64;     // documents per shuffle block
    std::uint64_t windowBlocks = 64;  // blocks interleaved together
    std::uint64_t prefetchSteps = 2;
    std::size_t openShards = 80;      // open shard files per source and rank (data.open_shards)
    // Blocks held, per source and rank (data.shard_memory_mb);
    // 0: sized to a shuffle window of each source (windowMemoryBytes in corpus.hpp).
    std::uint64_t shardMemoryBytes = 0;
    // Shards read with preads at the chunk places HDF5 reports (shard_chunks.hpp);
    // false: every read through HDF5, as kiln read before (the benchmarks' baseline).
    bool readWithPreads = true;
    // Plan from each source's doc_lengths.h5 where it has one; false: from its
    // shards' offsets (the benchmarks' baseline).
    bool useLengthIndex = true;
    std::string tokenizer;            // "", "bytes" or a SentencePiece .model: what the sources must match

    // Identifies the mix (names and weights): a change starts a new weight segment.
    std::uint64_t weightsHash() const;
};

LoaderSpec loaderSpecFromDeck(const config::Deck& deck);
// The held-out validation data: data.eval_mix's sources with the training
// spec's sequence length, batch, seed and shuffling (no sources: no
// evaluation). A source that data.mix also names is refused by key.
LoaderSpec evalLoaderSpecFromDeck(const config::Deck& deck);

// data.open_shards = 0: the shards a shuffle window of `windowBlocks` blocks
// spans, a quarter more for blocks that straddle two shards (the reader's
// least recently used file is closed first; measured in perf/RESULTS.md).
inline std::size_t defaultOpenShards(std::uint64_t windowBlocks) {
    return static_cast<std::size_t>(windowBlocks + (windowBlocks + 3) / 4);
}

}  // namespace kiln::data
