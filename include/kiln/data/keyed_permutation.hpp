// A keyed pseudo-random bijection of [0, n) that needs no table: a balanced
// Feistel network on the smallest even number of bits that covers n, with
// cycle-walking to stay inside [0, n). O(1) memory, a few hash evaluations
// per call (more only when n is just above a power of four).
#pragma once

#include <cstdint>

namespace kiln::data {

class KeyedPermutation {
public:
    KeyedPermutation(std::uint64_t n, std::uint64_t key);
    std::uint64_t size() const { return n_; }
    std::uint64_t operator()(std::uint64_t x) const;  // x in [0, n)
    std::uint64_t inverse(std::uint64_t y) const;      // inverse(operator()(x)) == x

private:
    std::uint64_t encrypt(std::uint64_t x) const;  // bijection of [0, 2^(2*halfBits_))
    std::uint64_t decrypt(std::uint64_t y) const;
    std::uint64_t round(std::uint64_t half, int r) const;

    static constexpr int kRounds = 4;
    std::uint64_t n_;
    std::uint64_t key_;
    int halfBits_;
    std::uint64_t halfMask_;
};

}  // namespace kiln::data
