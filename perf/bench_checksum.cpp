// Chunk verification speed: kiln's Fletcher-32 (shard_chunks.hpp, which checks
// every chunk the stream reads with preads) against HDF5's own
// H5_checksum_fletcher32, the function its filter calls, on the same random
// bytes, page-cache-free (in memory). Metric: GB/s of checksummed bytes, for
// the chunk sizes kiln's shards have: 3 750 B (a 15 k-token shard's chunks of
// 1 875 16-bit tokens), 32 KiB (16 384 16-bit tokens) and 256 KiB (65 536
// 32-bit tokens). Exits non-zero if any result differs from HDF5's.
//
//   bench_checksum [--gigabytes G (2)]
// Output: one JSON object per line.
#include "kiln/data/shard_chunks.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

// Exported by libhdf5 (H5private.h, not its public headers): the baseline is
// HDF5's code itself, not a copy of it.
extern "C" std::uint32_t H5_checksum_fletcher32(const void* data, std::size_t len);

namespace {

using Clock = std::chrono::steady_clock;

// Seconds to checksum `total` bytes in pieces of `size` from `bytes` (cycled), and the sum of the results.
template <typename Checksum>
std::pair<double, std::uint64_t> timeIt(const std::vector<std::byte>& bytes, std::size_t size, std::size_t total,
                                        Checksum&& checksum) {
    std::uint64_t sum = 0;
    const auto start = Clock::now();
    for (std::size_t done = 0, at = 0; done < total; done += size) {
        sum += checksum(bytes.data() + at, size);
        at = (at + size) % (bytes.size() - size);
    }
    return {std::chrono::duration<double>(Clock::now() - start).count(), sum};
}

}  // namespace

int main(int argc, char** argv) {
    double gigabytes = 2;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "--gigabytes" && i + 1 < argc) {
            gigabytes = std::atof(argv[++i]);
        } else {
            fmt::print(stderr, "usage: bench_checksum [--gigabytes G]\n");
            return 2;
        }
    }
    std::mt19937_64 rng(7);
    std::vector<std::byte> bytes(4u << 20);  // cycled through: in L2/L3, as a chunk just read is
    for (auto& b : bytes) b = static_cast<std::byte>(rng());
    const auto total = static_cast<std::size_t>(gigabytes * 1e9);
    bool allEqual = true;
    for (const std::size_t size : {std::size_t{3750}, std::size_t{32768 + 4}, std::size_t{262144 + 4}}) {
        const auto [kilnSeconds, kilnSum] = timeIt(bytes, size, total, [](const std::byte* p, std::size_t n) {
            return kiln::data::fletcher32({p, n});
        });
        const auto [hdf5Seconds, hdf5Sum] = timeIt(bytes, size, total, [](const std::byte* p, std::size_t n) {
            return H5_checksum_fletcher32(p, n);
        });
        // Equal chunk by chunk at every offset of the first 64 KiB (alignments included), not only in sum.
        bool equal = kilnSum == hdf5Sum;
        for (std::size_t at = 0; at < 65536 && equal; at += 7)
            equal = kiln::data::fletcher32({bytes.data() + at, size}) == H5_checksum_fletcher32(bytes.data() + at, size);
        allEqual = allEqual && equal;
        fmt::print("{{\"bench\":\"fletcher32\",\"chunk_bytes\":{},\"kiln_gb_per_s\":{:.2f},\"hdf5_gb_per_s\":{:.2f},"
                   "\"speedup\":{:.2f},\"equal\":{}}}\n",
                   size, total / kilnSeconds / 1e9, total / hdf5Seconds / 1e9, hdf5Seconds / kilnSeconds, equal);
    }
    return allEqual ? 0 : 1;
}
