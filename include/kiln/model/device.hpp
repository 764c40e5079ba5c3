// Where a rank computes, and waiting for it.
#pragma once

#include <torch/torch.h>

#include <string>

namespace kiln::model {

// The device of `setting` (train.device: cpu, cuda or auto; `origin` names
// the deck line for errors). A rank's GPU is its place among the ranks of its
// host (`rankOnHost`): ranks of one host get distinct GPUs whatever order the
// launcher numbered them in. Throws InputError for cuda without a CUDA device.
torch::Device chooseDevice(const std::string& setting, const std::string& origin, int rankOnHost);

// The device's name as its driver reports it ("NVIDIA H100 80GB HBM3"); "cpu" on the CPU.
std::string deviceName(const torch::Device& device);

// Returns once everything queued on `device` has run, so that a host clock
// around it measures the work and not only its launch (CUDA kernels run
// asynchronously); nothing on the CPU.
inline void waitForDevice(const torch::Device& device) {
    if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

}  // namespace kiln::model
