// The loader's whole state: a few integers per source, identical on every
// rank, advanced only when a step is committed. Together with the deck it
// determines every future global batch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::data {

struct SourceCursor {
    std::string name;
    std::uint64_t epoch = 0;          // epochs of this source completed
    std::uint64_t docPos = 0;         // position in this epoch's document order
    std::uint64_t tokenOffset = 0;    // offset into that document's tokens + EOS
    std::uint64_t samples = 0;        // samples this source has given, in total
    std::uint64_t segmentBase = 0;    // `samples` when the current weights took effect
    std::uint64_t docsDone = 0;       // documents fully consumed, all epochs
    std::uint64_t tokensDropped = 0;  // epoch tails shorter than a sample, all epochs

    bool operator==(const SourceCursor&) const = default;
};

struct Cursor {
    std::uint64_t step = 0;          // steps committed
    std::uint64_t samples = 0;       // samples of the global stream consumed
    std::uint64_t segmentStart = 0;  // `samples` when the current weights took effect
    std::uint64_t weightsHash = 0;   // the weights of the current segment
    std::vector<SourceCursor> sources;

    bool operator==(const Cursor&) const = default;
    const SourceCursor* find(const std::string& name) const;
};

// A cursor as one row of integers (names travel separately) and back.
std::vector<std::uint64_t> cursorToRow(const Cursor& cursor);
Cursor cursorFromRow(const std::vector<std::uint64_t>& row, const std::vector<std::string>& names);

}  // namespace kiln::data
