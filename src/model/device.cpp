#include "kiln/model/device.hpp"

#include "kiln/base/error.hpp"

#include <fmt/format.h>

#include <algorithm>

#if KILN_HAVE_CUDA_RUNTIME
#include <cuda_runtime_api.h>
#endif

namespace kiln::model {

torch::Device chooseDevice(const std::string& setting, const std::string& origin, int rankOnHost) {
    const bool cuda = torch::cuda::is_available();
    if (setting == "cuda" && !cuda)
        throw InputError(fmt::format("{}: train.device = cuda, but libtorch sees no CUDA device here (is this libtorch "
                                     "built with CUDA? Debian's is CPU only); use cpu or auto",
                                     origin));
    if (setting == "cuda" || (setting == "auto" && cuda)) {
        const int local = static_cast<int>(rankOnHost % std::max<std::int64_t>(1, torch::cuda::device_count()));
        return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(local));
    }
    return torch::Device(torch::kCPU);
}

std::string deviceName(const torch::Device& device) {
#if KILN_HAVE_CUDA_RUNTIME
    cudaDeviceProp properties{};
    if (device.is_cuda() && cudaGetDeviceProperties(&properties, device.index()) == cudaSuccess) return properties.name;
#endif
    return device.is_cuda() ? "cuda" : "cpu";
}

}  // namespace kiln::model
