#include "kiln/model/compute_clock.hpp"

#include "kiln/base/error.hpp"

#include <fmt/format.h>

#include <thread>
#include <vector>

#if KILN_HAVE_CUDA_RUNTIME
#include <cuda_runtime_api.h>
#endif

namespace kiln::model {

#if KILN_HAVE_CUDA_RUNTIME

namespace {

void checkCuda(cudaError_t rc, const char* what) {
    if (rc != cudaSuccess) throw std::runtime_error(fmt::format("{}: {}", what, cudaGetErrorString(rc)));
}

// Polls `event` until the device reached it; sleeps between polls so that a
// waiting rank leaves its core to the others.
void waitForEvent(cudaEvent_t event, std::chrono::milliseconds deadline, const char* what) {
    const auto start = std::chrono::steady_clock::now();
    for (;;) {
        const cudaError_t state = cudaEventQuery(event);
        if (state == cudaSuccess) return;
        if (state != cudaErrorNotReady) checkCuda(state, what);
        if (std::chrono::steady_clock::now() - start > deadline)
            throw std::runtime_error(fmt::format("{}: the GPU did not finish its queued work within {} ms "
                                                 "(fault.nccl_timeout_s); this process gives up",
                                                 what, deadline.count()));
        std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
}

}  // namespace

// kiln computes on libtorch's default stream, the legacy one (as the NCCL
// transport's afterCompute assumes).
struct ComputeClock::Device {
    int index = 0;
    std::vector<cudaEvent_t> events;  // reused from step to step
    std::size_t used = 0;
    ~Device() {
        for (cudaEvent_t e : events) cudaEventDestroy(e);
    }
};

ComputeClock::ComputeClock(torch::Device device, std::chrono::milliseconds deadline)
    : device_(device), deadline_(deadline) {
    if (device_.is_cuda()) {
        cuda_ = std::make_unique<Device>();
        cuda_->index = device_.index();
    }
}

ComputeClock::Mark ComputeClock::mark() {
    if (!cuda_) {
        host_.push_back(std::chrono::steady_clock::now());
        return host_.size() - 1;
    }
    checkCuda(cudaSetDevice(cuda_->index), "cudaSetDevice");
    if (cuda_->used == cuda_->events.size()) {
        cudaEvent_t e = nullptr;
        checkCuda(cudaEventCreate(&e), "cudaEventCreate");
        cuda_->events.push_back(e);
    }
    checkCuda(cudaEventRecord(cuda_->events[cuda_->used], cudaStreamLegacy), "cudaEventRecord");
    return cuda_->used++;
}

double ComputeClock::seconds(Mark from, Mark to) {
    if (!cuda_) return std::chrono::duration<double>(host_.at(to) - host_.at(from)).count();
    waitForEvent(cuda_->events.at(to), deadline_, "timing the step's compute");
    float ms = 0.0f;
    checkCuda(cudaEventElapsedTime(&ms, cuda_->events.at(from), cuda_->events.at(to)), "cudaEventElapsedTime");
    return ms / 1e3;
}

void ComputeClock::reset() {
    host_.clear();
    if (cuda_) cuda_->used = 0;
}

void waitForDevice(const torch::Device& device, std::chrono::milliseconds deadline) {
    if (!device.is_cuda()) return;
    checkCuda(cudaSetDevice(device.index()), "cudaSetDevice");
    cudaEvent_t event = nullptr;
    checkCuda(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate");
    struct Destroy {
        cudaEvent_t e;
        ~Destroy() { cudaEventDestroy(e); }
    } destroy{event};
    checkCuda(cudaEventRecord(event, cudaStreamLegacy), "cudaEventRecord");
    waitForEvent(event, deadline, "waiting for the GPU");
}

#else  // a build without the CUDA runtime: the CPU only

namespace {

[[noreturn]] void noCuda() {
    throw std::logic_error("kiln was built without the CUDA runtime: no device clock for a CUDA device");
}

}  // namespace

struct ComputeClock::Device {};

ComputeClock::ComputeClock(torch::Device device, std::chrono::milliseconds deadline)
    : device_(device), deadline_(deadline) {
    if (device_.is_cuda()) noCuda();
}

ComputeClock::Mark ComputeClock::mark() {
    host_.push_back(std::chrono::steady_clock::now());
    return host_.size() - 1;
}

double ComputeClock::seconds(Mark from, Mark to) {
    return std::chrono::duration<double>(host_.at(to) - host_.at(from)).count();
}

void ComputeClock::reset() { host_.clear(); }

void waitForDevice(const torch::Device& device, std::chrono::milliseconds) {
    if (device.is_cuda()) noCuda();
}

#endif

ComputeClock::~ComputeClock() = default;

}  // namespace kiln::model
