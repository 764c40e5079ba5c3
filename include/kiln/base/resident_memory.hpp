// This process's resident memory, from /proc/self/status: what the memory
// model is held to on the CPU (the heap is kept, base/heap.hpp, so the peak
// of a step stays resident and shows in the high-water mark).
#pragma once

#include <cstdint>

namespace kiln::base {

// VmRSS and VmHWM (the peak since the process started) in bytes; 0 where
// /proc is not there.
std::uint64_t residentBytes();
std::uint64_t peakResidentBytes();

}  // namespace kiln::base
