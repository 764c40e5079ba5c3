// The GPU's memory as its caching allocator counts it: what the memory model
// is held to on GPUs (on the CPU, the resident set: cpu_allocations.hpp).
#pragma once

#include <cstdint>

namespace kiln::model {

struct DeviceMemoryPeak {
    bool known = false;          // false on the CPU and in builds without CUDA
    std::int64_t allocated = 0;  // the most bytes in tensors at once
    std::int64_t reserved = 0;   // the most bytes the allocator held from the device
};

// Both for the CUDA device `index`; a negative index (the CPU) does nothing
// and reads nothing.
void resetDeviceMemoryPeak(int index);
DeviceMemoryPeak deviceMemoryPeak(int index);

}  // namespace kiln::model
