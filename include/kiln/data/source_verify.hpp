// Full verification of a prepared source (what kiln inspect runs): every
// shard opens and matches the manifest, checksums match, offsets are monotone
// and end at the token count, every token id is below the vocabulary size,
// and the length index (doc_lengths.h5), where there is one, agrees with the offsets.
#pragma once

#include "kiln/data/source_reader.hpp"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::data {

struct SourceStats {
    std::uint64_t numDocs = 0;
    std::uint64_t numTokens = 0;
    std::uint64_t minLength = 0;
    std::uint64_t maxLength = 0;
    // lengthHistogram[k] counts documents of length in [2^(k-1), 2^k); [0] counts empty ones.
    std::array<std::uint64_t, 40> lengthHistogram{};
};

struct VerifyReport {
    std::vector<std::string> problems;  // one line each, naming the shard
    SourceStats stats;
    bool ok() const { return problems.empty(); }
};

VerifyReport verifySource(SourceReader& reader);

}  // namespace kiln::data
