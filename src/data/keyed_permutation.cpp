#include "kiln/data/keyed_permutation.hpp"

#include "kiln/base/hash.hpp"

#include <bit>
#include <stdexcept>

namespace kiln::data {

KeyedPermutation::KeyedPermutation(std::uint64_t n, std::uint64_t key) : n_(n), key_(base::mix64(key)) {
    if (n == 0) throw std::invalid_argument("KeyedPermutation of an empty range");
    const int bits = std::max(2, static_cast<int>(std::bit_width(n - 1)));
    halfBits_ = (bits + 1) / 2;
    halfMask_ = (std::uint64_t{1} << halfBits_) - 1;
}

std::uint64_t KeyedPermutation::round(std::uint64_t half, int r) const {
    return base::mix64(key_ ^ base::mix64(half + (static_cast<std::uint64_t>(r) << 58))) & halfMask_;
}

std::uint64_t KeyedPermutation::encrypt(std::uint64_t x) const {
    std::uint64_t left = x >> halfBits_, right = x & halfMask_;
    for (int r = 0; r < kRounds; ++r) {
        const std::uint64_t next = left ^ round(right, r);
        left = right;
        right = next;
    }
    return (left << halfBits_) | right;
}

std::uint64_t KeyedPermutation::decrypt(std::uint64_t y) const {
    std::uint64_t left = y >> halfBits_, right = y & halfMask_;
    for (int r = kRounds - 1; r >= 0; --r) {
        const std::uint64_t previous = right ^ round(left, r);
        right = left;
        left = previous;
    }
    return (left << halfBits_) | right;
}

// Cycle-walking: the domain is at most 4x n, so the expected number of
// steps is below 4, and the walk stays inside the cycle that contains x.
std::uint64_t KeyedPermutation::operator()(std::uint64_t x) const {
    std::uint64_t y = encrypt(x);
    while (y >= n_) y = encrypt(y);
    return y;
}

std::uint64_t KeyedPermutation::inverse(std::uint64_t y) const {
    std::uint64_t x = decrypt(y);
    while (x >= n_) x = decrypt(x);
    return x;
}

}  // namespace kiln::data
