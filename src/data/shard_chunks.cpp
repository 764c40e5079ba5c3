// HDF5 is called directly here, not through io's typed layer: this reads HDF5's own chunk index (layout,
// filters, chunk addresses), below what a typed array is, so that the stream can then read the chunks without
// the library (shard_chunks.hpp says why).
#include "kiln/data/shard_chunks.hpp"

#include "kiln/io/hdf5.hpp"

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>

namespace kiln::data {

namespace h5 = io::h5;

namespace {

constexpr std::size_t kChecksumBytes = 4;

// Whether the dataset's file has no user block: HDF5's chunk addresses are
// relative to its base address, which a user block would move.
bool addressesAreOffsets(hid_t dataset) {
    h5::Handle file(H5Iget_file_id(dataset));
    if (!file.valid()) return false;
    h5::Handle create(H5Fget_create_plist(file));
    hsize_t userBlock = 1;
    return create.valid() && H5Pget_userblock(create, &userBlock) >= 0 && userBlock == 0;
}

// The dataset's chunk places (chunkList's conditions); `backToBack`: none
// unless each chunk follows the one before, asked no further than the first
// that does not (a large shard written in pieces has a gap within its first
// megabytes: its thousand chunks are not all looked up at start-up).
std::optional<ChunkList> listChunks(hid_t dataset, std::uint64_t length, std::size_t elementBytes, bool backToBack,
                                    const std::string& context) {
    // The stored bytes are copied as they are: a big-endian host reads through HDF5.
    if constexpr (std::endian::native != std::endian::little) return std::nullopt;
    if (length == 0) return std::nullopt;
    h5::Handle create(KILN_H5(H5Dget_create_plist(dataset), context));
    hsize_t chunk[1] = {0};
    if (H5Pget_layout(create) != H5D_CHUNKED || H5Pget_chunk(create, 1, chunk) != 1 || chunk[0] == 0) return std::nullopt;
    unsigned flags = 0, config = 0;
    std::size_t values = 0;
    if (H5Pget_nfilters(create) != 1 ||
        H5Pget_filter2(create, 0, &flags, &values, nullptr, 0, nullptr, &config) != H5Z_FILTER_FLETCHER32)
        return std::nullopt;
    h5::Handle type(KILN_H5(H5Dget_type(dataset), context));
    if (H5Tget_class(type) != H5T_INTEGER || H5Tget_size(type) != elementBytes || H5Tget_order(type) != H5T_ORDER_LE)
        return std::nullopt;
    const std::uint64_t chunkBytes = chunk[0] * elementBytes + kChecksumBytes;
    if (chunkBytes > std::numeric_limits<std::uint32_t>::max() || !addressesAreOffsets(dataset)) return std::nullopt;
    const std::uint64_t chunks = (length + chunk[0] - 1) / chunk[0];
    if (chunks > kMaxListedChunks) return std::nullopt;  // the lookups below cost O(chunks^2)
    ChunkList list;
    list.chunkBytes = static_cast<std::uint32_t>(chunkBytes);
    list.at.resize(chunks);
    for (std::uint64_t k = 0; k < list.at.size(); ++k) {
        hsize_t offset[1] = {k * chunk[0]}, size = 0;
        unsigned skipped = 0;
        haddr_t address = HADDR_UNDEF;
        if (H5Dget_chunk_info_by_coord(dataset, offset, &skipped, &address, &size) < 0) return std::nullopt;
        if (skipped != 0 || size != chunkBytes || address == HADDR_UNDEF || address == 0) return std::nullopt;
        if (backToBack && k > 0 && address != list.at[0] + k * chunkBytes) return std::nullopt;
        list.at[k] = address;
    }
    return list;
}

}  // namespace

std::optional<ChunkList> chunkList(hid_t dataset, std::uint64_t length, std::size_t elementBytes,
                                   const std::string& context) {
    return listChunks(dataset, length, elementBytes, /*backToBack=*/false, context);
}

std::optional<ChunkRun> contiguousChunks(hid_t dataset, std::uint64_t length, std::size_t elementBytes,
                                         const std::string& context) {
    const auto list = listChunks(dataset, length, elementBytes, /*backToBack=*/true, context);
    if (!list || list->at.size() > std::numeric_limits<std::uint32_t>::max()) return std::nullopt;
    return ChunkRun{list->at[0], list->chunkBytes, static_cast<std::uint32_t>(list->at.size())};
}

namespace {

// Fletcher-32 by blocks of kLanes words side by side: lane j sums words j,
// j + kLanes, ... (a) and those sums' running total (b); a block's sums follow
// from them (below). GCC's vector types: SSE2 everywhere, AVX2 where the CPU
// has it (target_clones).
constexpr unsigned kLanes = 8;
using LaneWords = std::uint16_t __attribute__((vector_size(2 * kLanes), aligned(1)));
using LaneSums = std::uint32_t __attribute__((vector_size(4 * kLanes)));
// A lane's running total stays below 2^32 for this many vectors: 360 * 361 / 2 * 65535.
constexpr std::size_t kVectorsPerBlock = 360;
constexpr std::uint64_t kModulus = 65535;

}  // namespace

#if defined(__x86_64__)
__attribute__((target_clones("avx2", "default")))
#endif
std::uint32_t fletcher32(std::span<const std::byte> bytes) {
    // HDF5's form (sums folded every 360 words, an odd last byte the high half
    // of a word) computed as residues modulo 65535, which folding preserves.
    // Folding a positive sum never gives 0, so HDF5's result has 65535 where
    // the residue is 0, unless every word is 0 (then both sums are 0): `any`.
    // About 20 GB/s with AVX2 here, 5.5 with SSE2, against 3.7 for HDF5's loop
    // (a word at a time, each sum waiting for the one before).
    const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
    std::size_t words = bytes.size() / 2;
    std::uint64_t low = 0, high = 0;
    bool any = false;
    while (words >= kLanes) {
        const std::size_t vectors = std::min<std::size_t>(words / kLanes, kVectorsPerBlock);
        LaneSums a{}, b{};
        for (std::size_t t = 0; t < vectors; ++t, p += 2 * kLanes) {
            LaneWords w;
            std::memcpy(&w, p, sizeof w);
            w = static_cast<LaneWords>((w << 8) | (w >> 8));  // the words are big-endian
            a += __builtin_convertvector(w, LaneSums);
            b += a;
        }
        // Word i of the block's n weighs 1 in its low sum and n - i in its high
        // sum; lane j's word of vector t is i = kLanes t + j, and b weighs it
        // vectors - t: so n - i = kLanes (vectors - t) - j.
        std::uint64_t blockLow = 0, blockHigh = 0;
        for (unsigned j = 0; j < kLanes; ++j) {
            blockLow += a[j];
            blockHigh += kLanes * std::uint64_t{b[j]} - j * std::uint64_t{a[j]};  // b[j] >= a[j]: no wrap
        }
        const std::uint64_t n = vectors * kLanes;
        high = (high + n % kModulus * low + blockHigh) % kModulus;
        low = (low + blockLow) % kModulus;
        any = any || blockLow != 0;
        words -= n;
    }
    for (; words > 0; --words, p += 2) {  // fewer than kLanes: no overflow
        const std::uint32_t word = (std::uint32_t{p[0]} << 8) | p[1];
        low += word;
        high += low;
        any = any || word != 0;
    }
    if (bytes.size() % 2 != 0) {
        low += std::uint32_t{p[0]} << 8;
        high += low;
        any = any || p[0] != 0;
    }
    if (!any) return 0;
    low %= kModulus;
    high %= kModulus;
    return static_cast<std::uint32_t>(((high == 0 ? kModulus : high) << 16) | (low == 0 ? kModulus : low));
}

bool preadFully(int fd, void* into, std::size_t bytes, std::uint64_t at) {
    for (std::size_t done = 0; done < bytes;) {
        const ssize_t n = ::pread(fd, static_cast<char*>(into) + done, bytes - done, static_cast<off_t>(at + done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        done += static_cast<std::size_t>(n);
    }
    return true;
}

bool readChunks(int fd, const ChunkPlaces& places, std::size_t elementBytes, std::uint64_t from, std::uint64_t count,
                void* out, ReadBuffer<std::byte>& scratch) {
    if (count == 0) return true;
    if (places.chunkBytes <= kChecksumBytes) return false;
    const std::size_t dataBytes = places.chunkBytes - kChecksumBytes;
    const std::uint64_t perChunk = dataBytes / elementBytes;
    const std::uint64_t firstChunk = from / perChunk, endChunk = (from + count - 1) / perChunk + 1;
    if (endChunk > places.chunks) return false;
    for (std::uint64_t k = firstChunk; k < endChunk;) {
        // Chunks k .. next-1 lie back to back: one read.
        std::uint64_t next = k + 1;
        while (next < endChunk && places.at(next) == places.at(k) + (next - k) * places.chunkBytes) ++next;
        const std::size_t bytes = (next - k) * places.chunkBytes;
        scratch.resize(bytes);
        if (!preadFully(fd, scratch.data(), bytes, places.at(k))) return false;
        for (std::uint64_t c = k; c < next; ++c) {
            const std::byte* chunk = scratch.data() + (c - k) * places.chunkBytes;
            std::uint32_t stored = 0;
            std::memcpy(&stored, chunk + dataBytes, kChecksumBytes);  // little-endian, as this host
            if (fletcher32({chunk, dataBytes}) != stored) return false;
            // This chunk's share of [from, from + count).
            const std::uint64_t begin = std::max(from, c * perChunk), end = std::min(from + count, (c + 1) * perChunk);
            const std::byte* source = chunk + (begin - c * perChunk) * elementBytes;
            if (elementBytes == 2) {  // 16-bit tokens widen to 32
                auto* into = static_cast<std::uint32_t*>(out) + (begin - from);
                for (std::uint64_t i = 0; i < end - begin; ++i) {
                    std::uint16_t value = 0;
                    std::memcpy(&value, source + i * 2, 2);
                    into[i] = value;
                }
            } else {
                std::memcpy(static_cast<std::byte*>(out) + (begin - from) * elementBytes, source, (end - begin) * elementBytes);
            }
        }
        k = next;
    }
    return true;
}

}  // namespace kiln::data
