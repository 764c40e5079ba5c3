#include "straggler_probe.hpp"

#include "kiln/model/compute_clock.hpp"
#include "kiln/model/gpt.hpp"

#include <torch/torch.h>

#include <atomic>
#include <thread>

namespace kiln::train {

struct StragglerProbe::Impl {
    Impl(const arch::ModelConfig& config, std::uint64_t microBatch, c10::Device device,
         std::chrono::milliseconds deadline)
        : block(config, kLayer, kLayer + 1), clock(device, deadline) {
        block.to(device);
        // Fixed activations: every probe does the same work.
        const auto generator = at::detail::createCPUGenerator(config.seed);
        input = torch::randn({static_cast<std::int64_t>(microBatch), config.seqLen, config.dModel}, generator,
                             torch::TensorOptions().dtype(torch::kFloat32))
                    .to(device);
    }
    model::Gpt block;
    model::ComputeClock clock;
    torch::Tensor input;
    std::thread beside;              // runBeside's probe
    std::atomic<bool> running{false};
    std::atomic<double> finished{0.0};  // its last result
};

StragglerProbe::StragglerProbe(const arch::ModelConfig& model, std::uint64_t microBatch, c10::Device device,
                               std::chrono::milliseconds deadline)
    : impl_(std::make_unique<Impl>(model, microBatch, device, deadline)) {}

StragglerProbe::~StragglerProbe() {
    if (impl_->beside.joinable()) impl_->beside.join();  // at most one probe's time
}

double StragglerProbe::runBeside(std::uint64_t step, const fault::FaultInjector& injector) {
    Impl& p = *impl_;
    if (!p.running.load()) {
        if (p.beside.joinable()) p.beside.join();
        p.running = true;
        p.beside = std::thread([this, step, &injector] {
            impl_->finished = run(step, injector);
            impl_->running = false;
        });
    }
    return p.finished.load();
}

double StragglerProbe::run(std::uint64_t step, const fault::FaultInjector& injector) {
    Impl& p = *impl_;
    p.clock.reset();
    const auto f0 = p.clock.mark();
    const torch::Tensor output = p.block.forward(p.input);
    if (injector.slows(step)) injector.straggle(step, fault::Phase::Forward, p.clock.seconds(f0, p.clock.mark()));
    const auto b0 = p.clock.mark();
    output.sum().backward();
    if (injector.slows(step)) injector.straggle(step, fault::Phase::Backward, p.clock.seconds(b0, p.clock.mark()));
    const double seconds = p.clock.seconds(f0, p.clock.mark());
    // The gradients are not wanted: the next probe starts from none.
    for (auto& parameter : p.block.parameters()) parameter.mutable_grad() = torch::Tensor();
    return seconds;
}

}  // namespace kiln::train
