// The opened sources of a loader spec, checked: they exist, share one
// tokenizer (the deck's, when it names one), each holds at least one sample,
// and every shard's metadata agrees with its manifest.
//
// Ranks that open a corpus together (a job's ranks) share the work, so that a
// rank's start-up does not grow with the corpus: one rank reads each source's
// manifest and index and broadcasts them, and the shard checks are divided
// among the ranks (each opens its share of the shards; the first problem found
// stops every rank with one message naming the shard). Shards are opened
// later, lazily, as the stream reaches them, through a bounded cache per reader.
#pragma once

#include "kiln/data/loader_spec.hpp"
#include "kiln/data/source_reader.hpp"

#include <mpi.h>

#include <memory>
#include <vector>

namespace kiln::data {

struct CorpusSharing {
    MPI_Comm comm = MPI_COMM_NULL;  // the ranks opening together; MPI_COMM_NULL: this process alone
    bool checkShards = true;        // false: already checked by the job this process joins
};

// data.shard_memory_mb = 0: a reader's memory for held shards and blocks,
// sized to what one shuffle window holds of `shards`, a quarter more:
// `windowBlocks` blocks of `blockDocs` documents of the source's mean length
// (tokens and offsets); at least 8 MiB, at most 256 MiB.
std::uint64_t windowMemoryBytes(const ShardTable& shards, std::uint64_t blockDocs, std::uint64_t windowBlocks);

class Corpus {
public:
    // Collective over `sharing.comm` when it is set.
    explicit Corpus(const LoaderSpec& spec, const CorpusSharing& sharing = {});
    std::size_t size() const { return readers_.size(); }
    SourceReader& reader(std::size_t source) { return *readers_[source]; }
    const TokenizerInfo& tokenizer() const { return tokenizer_; }
    // Shards this process checked at start-up (its share), of how many in all.
    std::uint64_t shardsChecked() const { return checked_; }
    std::uint64_t shardsInAll() const { return total_; }
    // The most host memory its readers hold shards and blocks in, together
    // (data.shard_memory_mb, or a shuffle window of each source).
    std::uint64_t memoryBudget() const;

private:
    std::vector<std::unique_ptr<SourceReader>> readers_;
    TokenizerInfo tokenizer_;
    std::uint64_t checked_ = 0, total_ = 0;
};

}  // namespace kiln::data
