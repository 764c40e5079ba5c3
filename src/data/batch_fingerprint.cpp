#include "kiln/data/batch_fingerprint.hpp"

#include "kiln/base/hash.hpp"

namespace kiln::data {

std::uint64_t sliceFingerprint(const Batch& batch) {
    std::uint64_t sum = 0;
    for (std::uint64_t i = 0; i < batch.count; ++i) {
        std::uint64_t h = base::mix64(batch.step * 0x100000001b3ull + batch.first + i);
        for (std::uint64_t k = 0; k < batch.sampleLength; ++k) h = base::mix64(h ^ batch.tokens[i * batch.sampleLength + k]);
        sum += h;
    }
    return sum;
}

}  // namespace kiln::data
