// libtorch's host memory, counted and cached: what the memory model is held
// to on the CPU (the CUDA caching allocator keeps its own statistics), how
// the profiler measures what a layer keeps for its backward pass, and why
// the process's resident set follows the plan (perf/RESULTS.md, "Memory").
#pragma once

#include <cstdint>

namespace kiln::model {

// Puts kiln's allocator in front of libtorch's CPU allocator: every tensor
// counted; tensors of 64 KiB and more in pages of their own, kept after
// they are freed for the next request of the same size (a step's sizes
// repeat every step). Idempotent; call before the first tensor.
void countCpuAllocations();

// Live bytes now, and the most live at once since the last resetCpuPeak().
// Both 0 until countCpuAllocations() was called.
std::int64_t cpuAllocatedBytes();
std::int64_t cpuPeakAllocatedBytes();
void resetCpuPeak();

// Bytes of freed tensors kept for reuse.
std::int64_t cpuCachedFreeBytes();
// Bytes the tensors take from the system (live ones, and blocks kept for
// reuse), now and at most since the last resetCpuPeak(): the resident set's
// share that is libtorch's.
std::int64_t cpuHeldBytes();
std::int64_t cpuPeakHeldBytes();
// At the end of a step: gives back to the system the kept blocks that no
// request took since the last trim (what the steps no longer use).
void trimCpuCache();
// After work between steps that allocates other sizes (checkpoints, layer
// transfers, a new layout): gives back every kept block.
void releaseCpuCache();

}  // namespace kiln::model
