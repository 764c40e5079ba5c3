// The order in which one epoch of a source visits its documents, as a pure
// function of the position: no permutation array, O(1) memory and time.
//
// Documents are grouped into blocks of `blockDocs` consecutive documents. A
// keyed permutation orders the blocks; consecutive runs of `windowBlocks`
// blocks form a window, and a second keyed permutation (one per window)
// interleaves all documents of the window's blocks. So reads stay within
// `windowBlocks` regions of the source at a time (locality for the chunk
// cache), while neighbouring positions rarely hold neighbouring documents.
#pragma once

#include <cstdint>

namespace kiln::data {

class EpochOrder {
public:
    EpochOrder(std::uint64_t numDocs, std::uint64_t blockDocs, std::uint64_t windowBlocks, std::uint64_t key);
    std::uint64_t size() const { return numDocs_; }
    // The document visited at position p (0 <= p < size()).
    std::uint64_t docAt(std::uint64_t p) const;
    // The block of a document (for shuffle-quality measurements).
    std::uint64_t blockOf(std::uint64_t doc) const { return doc / blockDocs_; }

private:
    std::uint64_t groupStart(std::uint64_t g) const;
    std::uint64_t groupSize(std::uint64_t g) const;
    std::uint64_t blocksIn(std::uint64_t g) const;

    std::uint64_t numDocs_, blockDocs_, windowBlocks_, key_;
    std::uint64_t numBlocks_, lastBlockSize_, deficit_, numGroups_;
    std::uint64_t partialSlot_;  // slot of the last (possibly short) block in the block order
};

// The key of epoch `epoch` of source `source` under `seed`.
std::uint64_t epochKey(std::uint64_t seed, const char* source, std::uint64_t epoch);

}  // namespace kiln::data
