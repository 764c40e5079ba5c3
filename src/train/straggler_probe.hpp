// What the benched ranks of a retired straggler do every step, so that the
// job learns when their node has recovered: one block of the model forward
// and backward on one microbatch of fixed random activations, timed like a
// stage's compute (an injected ':slow=' lag included, as on a stage). The
// speed monitor compares it with the plan's time for that block, scaled as
// the working ranks' times are (plan/speed_monitor.hpp). On the benched ranks
// the probe runs beside the steps: a node still slower than a whole step would
// otherwise hold up every step at the step's collective. Private to train/.
#pragma once

#include "kiln/fault/fault_injector.hpp"
#include "kiln/arch/model_config.hpp"

#include <c10/core/Device.h>

#include <chrono>
#include <cstdint>
#include <memory>

namespace kiln::train {

class StragglerProbe {
public:
    StragglerProbe(const arch::ModelConfig& model, std::uint64_t microBatch, c10::Device device,
                   std::chrono::milliseconds deadline);
    ~StragglerProbe();
    StragglerProbe(const StragglerProbe&) = delete;
    StragglerProbe& operator=(const StragglerProbe&) = delete;

    // Seconds the probe computed at `step`.
    double run(std::uint64_t step, const fault::FaultInjector& injector);
    // The seconds of the last probe that finished (0 before the first), a new one started on a helper thread
    // when none is running: the step goes on meanwhile. `injector` outlives the probe.
    double runBeside(std::uint64_t step, const fault::FaultInjector& injector);

private:
    static constexpr std::uint32_t kLayer = 1;  // the model layer it runs: the first block
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::train
