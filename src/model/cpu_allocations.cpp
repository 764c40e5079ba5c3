#include "kiln/model/cpu_allocations.hpp"

#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>

#include <atomic>
#include <cstring>

namespace kiln::model {
namespace {

std::atomic<std::int64_t> live{0}, peak{0};

struct Block {
    void* data;
    std::size_t bytes;
};

void release(void* context) {
    auto* block = static_cast<Block*>(context);
    live.fetch_sub(static_cast<std::int64_t>(block->bytes), std::memory_order_relaxed);
    c10::free_cpu(block->data);
    delete block;
}

c10::DataPtr counted(std::size_t bytes) {
    void* data = c10::alloc_cpu(bytes);
    const auto now =
        live.fetch_add(static_cast<std::int64_t>(bytes), std::memory_order_relaxed) + static_cast<std::int64_t>(bytes);
    for (auto seen = peak.load(std::memory_order_relaxed);
         now > seen && !peak.compare_exchange_weak(seen, now, std::memory_order_relaxed);) {
    }
    return {data, new Block{data, bytes}, &release, c10::Device(c10::DeviceType::CPU)};
}

// libtorch 1.13 (Debian's) declares allocate() const, libtorch 2 (the CUDA
// build's) not, and adds copy_data(): all are here, each overriding where
// the base declares it (hence no `override`).
class CountingAllocator final : public c10::Allocator {
public:
    c10::DataPtr allocate(std::size_t bytes) const { return counted(bytes); }
    c10::DataPtr allocate(std::size_t bytes) { return counted(bytes); }
    void copy_data(void* dest, const void* src, std::size_t count) const { std::memcpy(dest, src, count); }
};

}  // namespace

void countCpuAllocations() {
    static CountingAllocator allocator;
    static const bool installed = [] {
        c10::SetCPUAllocator(&allocator, /*priority=*/10);
        return true;
    }();
    (void)installed;
}

std::int64_t cpuAllocatedBytes() { return live.load(std::memory_order_relaxed); }
std::int64_t cpuPeakAllocatedBytes() { return peak.load(std::memory_order_relaxed); }
void resetCpuPeak() { peak.store(live.load(std::memory_order_relaxed), std::memory_order_relaxed); }

}  // namespace kiln::model
