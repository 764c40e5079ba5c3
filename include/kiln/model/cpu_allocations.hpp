// Bytes libtorch holds in host memory, counted: what the memory model is
// held to on the CPU (the CUDA caching allocator keeps its own statistics),
// and how the profiler measures what a layer keeps for its backward pass.
#pragma once

#include <cstdint>

namespace kiln::model {

// Puts a counting allocator in front of libtorch's CPU allocator (the same
// memory, aligned the same way). Idempotent; call before the first tensor.
void countCpuAllocations();

// Live bytes now, and the most live at once since the last resetCpuPeak().
// Both 0 until countCpuAllocations() was called.
std::int64_t cpuAllocatedBytes();
std::int64_t cpuPeakAllocatedBytes();
void resetCpuPeak();

}  // namespace kiln::model
