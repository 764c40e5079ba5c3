// splitmix64: a fast, well-mixed 64-bit hash of a word. The loader's keyed permutations and mix schedule and the
// model's per-layer seeds derive from it, so its values are part of what a deck means: never change it.
#pragma once

#include <cstdint>

namespace kiln::base {

constexpr std::uint64_t mix64(std::uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

}  // namespace kiln::base
