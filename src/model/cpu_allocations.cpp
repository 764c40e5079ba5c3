#include "kiln/model/cpu_allocations.hpp"

#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>

#include <sys/mman.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <limits>
#include <map>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

namespace kiln::model {
namespace {

std::atomic<std::int64_t> live{0}, peak{0};
// Bytes taken from the system for tensors: the C heap's live tensors and
// every mapped block, in use or kept. What the resident set holds for them.
std::atomic<std::int64_t> held{0}, heldPeak{0};

void raise(std::atomic<std::int64_t>& top, std::int64_t now) {
    for (auto seen = top.load(std::memory_order_relaxed);
         now > seen && !top.compare_exchange_weak(seen, now, std::memory_order_relaxed);) {
    }
}

void hold(std::int64_t bytes) {
    raise(heldPeak, held.fetch_add(bytes, std::memory_order_relaxed) + bytes);
}

// Tensors below this come from the C heap: many, small, and what the heap
// is good at. From this size up, pages of their own, kept for reuse.
// KILN_HOST_BLOCK_CACHE=off sends every tensor to the C heap: the baseline
// of perf/bench_memory.sh.
std::size_t cachedFrom = 64 << 10;
constexpr std::size_t kPage = 4096;

std::size_t pages(std::size_t bytes) { return (bytes + kPage - 1) / kPage * kPage; }

// Free blocks by exact (page-rounded) size. A training step asks for the
// same sizes in the same order every time, so after the first step every
// request finds a block of its own size: no page faults, and no block split
// for a smaller request, which is how a general heap drifts 15-30 % above
// what is live at once in a pipeline (forward passes of one microbatch
// interleaved with backward passes of another). What stays in the cache is
// at most, per size, the most blocks of that size live at once.
//
// Sizes that vary from one microbatch to the next (a mixture of experts' tokens per expert, rounded to a few
// sizes by the layer) would each keep blocks of their own: a request takes the smallest free block up to 1/4
// larger than it when none of its own size is free, and the block goes back to its own size's list.
class BlockCache {
public:
    // `bytes` becomes the size of the block taken.
    void* take(std::size_t& bytes) {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            for (auto it = free_.lower_bound(bytes); it != free_.end() && it->first <= bytes + bytes / 4; ++it) {
                auto& list = it->second;
                if (list.blocks.empty()) continue;
                void* block = list.blocks.back();
                list.blocks.pop_back();
                list.lowWater = std::min(list.lowWater, list.blocks.size());
                bytes = it->first;
                cachedFree_ -= bytes;
                return block;
            }
        }
        void* block = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (block == MAP_FAILED) {  // the kept blocks of other sizes first
            release();
            block = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        }
        if (block == MAP_FAILED) throw std::bad_alloc();
        hold(static_cast<std::int64_t>(bytes));
        return block;
    }

    void give(void* block, std::size_t bytes) {
        std::lock_guard<std::mutex> lock(mutex_);
        free_[bytes].blocks.push_back(block);
        cachedFree_ += bytes;
    }

    // Unmaps the blocks of each size that no request took since the last
    // trim (the fewest free at any moment since): a step's sizes are all
    // taken every step, so what is left is what the steps no longer use.
    void trim() {
        std::lock_guard<std::mutex> lock(mutex_);
        for (auto it = free_.begin(); it != free_.end();) {
            auto& [bytes, list] = *it;
            for (std::size_t k = 0; k < list.lowWater && !list.blocks.empty(); ++k) {
                munmap(list.blocks.back(), bytes);
                held.fetch_sub(static_cast<std::int64_t>(bytes), std::memory_order_relaxed);
                list.blocks.pop_back();
                cachedFree_ -= bytes;
            }
            list.lowWater = list.blocks.size();
            // Sizes met once (a checkpoint's pieces) leave no entry behind.
            it = list.blocks.empty() ? free_.erase(it) : std::next(it);
        }
    }

    void release() {
        std::lock_guard<std::mutex> lock(mutex_);
        for (auto& [bytes, list] : free_) {
            for (void* block : list.blocks) munmap(block, bytes);
            held.fetch_sub(static_cast<std::int64_t>(bytes * list.blocks.size()), std::memory_order_relaxed);
        }
        free_.clear();
        cachedFree_ = 0;
    }

    std::int64_t cachedFree() const {
        std::lock_guard<std::mutex> lock(mutex_);
        return static_cast<std::int64_t>(cachedFree_);
    }

private:
    struct FreeList {
        std::vector<void*> blocks;
        std::size_t lowWater = 0;
    };
    mutable std::mutex mutex_;
    std::map<std::size_t, FreeList> free_;  // by size: a request may take the next sizes up
    std::size_t cachedFree_ = 0;
};

BlockCache& cache() {
    // Never destroyed: tensors may be freed by static destructors after
    // main returns.
    static auto* instance = new BlockCache;
    return *instance;
}

// The memory of each live tensor: its DataPtr's context is the data pointer itself, as
// c10::Allocator::raw_allocate requires (libtorch's CPU kernels take scratch space through it, e.g. a small
// bfloat16 matrix product's), so what the deleter needs is kept here, by data pointer.
struct LiveBlock {
    std::size_t bytes;   // what libtorch asked for: the counted bytes
    std::size_t mapped;  // 0: from the C heap
};

class LiveBlocks {
public:
    void add(void* data, LiveBlock block) {
        std::lock_guard<std::mutex> lock(mutex_);
        blocks_.emplace(data, block);
    }
    LiveBlock remove(void* data) {
        std::lock_guard<std::mutex> lock(mutex_);
        const auto it = blocks_.find(data);
        const LiveBlock block = it->second;
        blocks_.erase(it);
        return block;
    }

private:
    std::mutex mutex_;
    std::unordered_map<void*, LiveBlock> blocks_;
};

LiveBlocks& liveBlocks() {
    static auto* instance = new LiveBlocks;  // never destroyed, as the cache
    return *instance;
}

// The deleter of every tensor's memory (and raw_deleter()).
void releaseBlock(void* data) {
    const LiveBlock block = liveBlocks().remove(data);
    live.fetch_sub(static_cast<std::int64_t>(block.bytes), std::memory_order_relaxed);
    if (block.mapped > 0) {
        cache().give(data, block.mapped);
    } else {
        held.fetch_sub(static_cast<std::int64_t>(block.bytes), std::memory_order_relaxed);
        c10::free_cpu(data);
    }
}

c10::DataPtr counted(std::size_t bytes) {
    if (bytes == 0) return {nullptr, nullptr, &releaseBlock, c10::Device(c10::DeviceType::CPU)};  // never released
    std::size_t mapped = bytes >= cachedFrom ? pages(bytes) : 0;
    void* data = mapped > 0 ? cache().take(mapped) : c10::alloc_cpu(bytes);
    if (mapped == 0) hold(static_cast<std::int64_t>(bytes));
    liveBlocks().add(data, {bytes, mapped});
    raise(peak, live.fetch_add(static_cast<std::int64_t>(bytes), std::memory_order_relaxed) + static_cast<std::int64_t>(bytes));
    return {data, data, &releaseBlock, c10::Device(c10::DeviceType::CPU)};
}

// libtorch 1.13 (Debian's) declares allocate() const, libtorch 2 (the CUDA
// build's) not, and adds copy_data(): all are here, each overriding where
// the base declares it (hence no `override`).
class CountingAllocator final : public c10::Allocator {
public:
    c10::DataPtr allocate(std::size_t bytes) const { return counted(bytes); }
    c10::DataPtr allocate(std::size_t bytes) { return counted(bytes); }
    void copy_data(void* dest, const void* src, std::size_t count) const { std::memcpy(dest, src, count); }
    c10::DeleterFnPtr raw_deleter() const override { return &releaseBlock; }
};

}  // namespace

void countCpuAllocations() {
    static CountingAllocator allocator;
    static const bool installed = [] {
        if (const char* cache = std::getenv("KILN_HOST_BLOCK_CACHE"); cache && std::string(cache) == "off")
            cachedFrom = std::numeric_limits<std::size_t>::max();
        c10::SetCPUAllocator(&allocator, /*priority=*/10);
        return true;
    }();
    (void)installed;
}

std::int64_t cpuAllocatedBytes() { return live.load(std::memory_order_relaxed); }
std::int64_t cpuPeakAllocatedBytes() { return peak.load(std::memory_order_relaxed); }
void resetCpuPeak() {
    peak.store(live.load(std::memory_order_relaxed), std::memory_order_relaxed);
    heldPeak.store(held.load(std::memory_order_relaxed), std::memory_order_relaxed);
}
std::int64_t cpuHeldBytes() { return held.load(std::memory_order_relaxed); }
std::int64_t cpuPeakHeldBytes() { return heldPeak.load(std::memory_order_relaxed); }
std::int64_t cpuCachedFreeBytes() { return cache().cachedFree(); }
void trimCpuCache() { cache().trim(); }
void releaseCpuCache() { cache().release(); }

}  // namespace kiln::model
