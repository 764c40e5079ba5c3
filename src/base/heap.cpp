#include "kiln/base/heap.hpp"

#include <malloc.h>

#include <cstdlib>
#include <cstring>

namespace kiln::base {
namespace {

bool userTuned(const char* tunable) {
    const char* tunables = std::getenv("GLIBC_TUNABLES");
    return tunables && std::strstr(tunables, tunable);
}

}  // namespace

void keepHeapForTraining() {
    // Setting a threshold by hand also stops glibc from moving it itself,
    // which is what makes the effect predictable. A value the user set through
    // GLIBC_TUNABLES wins: they asked for it.
    constexpr int kTrimThreshold = 1 << 30;
    constexpr int kMmapThreshold = 32 << 20;
    if (!userTuned("malloc.trim_threshold")) mallopt(M_TRIM_THRESHOLD, kTrimThreshold);
    if (!userTuned("malloc.mmap_threshold")) mallopt(M_MMAP_THRESHOLD, kMmapThreshold);
}

}  // namespace kiln::base
