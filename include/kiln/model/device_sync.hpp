// Waiting for a device's queued work, so that a host clock around it measures
// the work and not only its launch (CUDA kernels run asynchronously).
#pragma once

#include <torch/torch.h>

namespace kiln::model {

// Returns once everything queued on `device` has run; nothing on the CPU.
inline void waitForDevice(const torch::Device& device) {
    if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

}  // namespace kiln::model
