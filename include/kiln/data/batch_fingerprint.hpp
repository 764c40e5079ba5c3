// A fingerprint of a global batch that ranks can assemble from their slices:
// the sum over samples of a hash of (sample index, tokens). Equal
// fingerprints on different rank counts mean the same global batch.
#pragma once

#include "kiln/data/loader.hpp"

#include <cstdint>

namespace kiln::data {

// This slice's part of the fingerprint; sum the parts of all slices.
std::uint64_t sliceFingerprint(const Batch& batch);

}  // namespace kiln::data
