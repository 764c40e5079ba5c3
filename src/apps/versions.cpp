#include "versions.hpp"

#include <fmt/format.h>
#include <hdf5.h>
#include <torch/version.h>  // macros only: keeps this file cheap to compile

namespace kiln::apps {

std::string kilnVersion() { return KILN_VERSION; }

std::string hdf5Version() {
    unsigned major = 0, minor = 0, release = 0;
    H5get_libversion(&major, &minor, &release);
#ifdef H5_HAVE_PARALLEL
    const char* kind = " (parallel)";
#else
    const char* kind = " (serial)";
#endif
    return fmt::format("{}.{}.{}{}", major, minor, release, kind);
}

std::string torchVersion() { return TORCH_VERSION; }

}  // namespace kiln::apps
