#include "kiln/model/compute_threads.hpp"

#include <torch/torch.h>

#include <dlfcn.h>
#include <sched.h>

#include <algorithm>
#include <thread>

namespace kiln::model {
namespace {

int coresOfRank(int requested, int ranksOnHost) {
    if (requested > 0) return requested;
    const int host = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    cpu_set_t mask;
    if (sched_getaffinity(0, sizeof(mask), &mask) == 0) {
        const int allowed = CPU_COUNT(&mask);
        // Bound by a launcher: the binding already is this rank's share.
        if (allowed > 0 && allowed < host) return allowed;
    }
    return std::max(1, host / std::max(1, ranksOnHost));
}

}  // namespace

ComputeThreads useComputeThreads(int requested, int ranksOnHost) {
    ComputeThreads t;
    t.cores = coresOfRank(requested, ranksOnHost);
    // Looked up rather than linked: kiln runs with whichever BLAS libtorch has.
    using SetThreads = void (*)(int);
    auto setBlasThreads = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
    t.torchThreads = setBlasThreads ? 1 : t.cores;
    torch::set_num_threads(t.torchThreads);
    if (setBlasThreads) {
        t.blasThreads = t.cores;
        setBlasThreads(t.blasThreads);
    }
    return t;
}

}  // namespace kiln::model
