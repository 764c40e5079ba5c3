#include "kiln/model/device_memory.hpp"

#if KILN_HAVE_TORCH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace kiln::model {

#if KILN_HAVE_TORCH_CUDA

void resetDeviceMemoryPeak(int index) {
    if (index >= 0) c10::cuda::CUDACachingAllocator::resetPeakStats(static_cast<c10::DeviceIndex>(index));
}

DeviceMemoryPeak deviceMemoryPeak(int index) {
    if (index < 0) return {};
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(index));
    constexpr std::size_t kAllPools = 0;  // the aggregate of the small and large pools
    return {true, stats.allocated_bytes[kAllPools].peak, stats.reserved_bytes[kAllPools].peak};
}

#else

void resetDeviceMemoryPeak(int) {}
DeviceMemoryPeak deviceMemoryPeak(int) { return {}; }

#endif

}  // namespace kiln::model
