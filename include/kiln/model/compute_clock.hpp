// Timing the compute a rank queues on its device without waiting for it
// after every piece. On a GPU kernels run asynchronously: a host clock around
// them measures their launch, and waiting for the device after each
// microbatch (what kiln did) serialised the pipeline's drain against the
// gradient sums on NCCL's streams and could wait forever on a wedged device.
// Here a mark is a CUDA event on the compute stream, and the times are read
// once per step, waiting with a deadline; on the CPU a mark is the host clock
// (the work has run when the call returns).
#pragma once

#include <torch/types.h>

#include <chrono>
#include <cstddef>
#include <memory>

namespace kiln::model {

class ComputeClock {
public:
    // `deadline`: the longest seconds() waits for the device to reach a mark
    // before it throws (a device that never finishes becomes this process's
    // failure, which the survivors recover from).
    ComputeClock(torch::Device device, std::chrono::milliseconds deadline);
    ~ComputeClock();
    ComputeClock(const ComputeClock&) = delete;
    ComputeClock& operator=(const ComputeClock&) = delete;

    using Mark = std::size_t;
    // The point the device's queued work has reached once everything queued
    // so far has run.
    Mark mark();
    // Seconds from `from` to `to` on the device, once it has reached `to`.
    double seconds(Mark from, Mark to);
    // Forgets every mark (their events are reused): once per step.
    void reset();

private:
    struct Device;
    torch::Device device_;
    std::chrono::milliseconds deadline_;
    std::unique_ptr<Device> cuda_;  // events, on a GPU
    std::vector<std::chrono::steady_clock::time_point> host_;  // on the CPU
};

// Returns once everything queued on `device` has run, or throws after
// `deadline` (a wedged device): the deadline-polled form of waitForDevice.
void waitForDevice(const torch::Device& device, std::chrono::milliseconds deadline);

}  // namespace kiln::model
