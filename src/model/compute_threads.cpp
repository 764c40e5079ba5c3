#include "kiln/model/compute_threads.hpp"

#include <torch/torch.h>

#include <dlfcn.h>

#include <algorithm>
#include <thread>

namespace kiln::model {

int useComputeThreads(int requested, int ranksOnHost) {
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    const int threads = requested > 0 ? requested : std::max(1, cores / std::max(1, ranksOnHost));
    torch::set_num_threads(threads);
    // libtorch links whichever BLAS the system provides; only OpenBLAS has this
    // entry point (looked up, so that kiln runs with any BLAS).
    using SetThreads = void (*)(int);
    if (auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) set(threads);
    return threads;
}

}  // namespace kiln::model
