// Model and hardware FLOPs per token, and the devices' peaks they are measured
// against: MFU is what the model needs (forward, and backward twice) over the
// job's peak; the hardware FLOPs utilization adds what recomputation runs
// again (full: the recomputing stages' layers' forward; selective: attention's
// core in every block).
#pragma once

#include "kiln/arch/model_config.hpp"
#include "kiln/plan/layout.hpp"

#include <string>
#include <vector>

namespace kiln::plan {

struct FlopsPerToken {
    double model = 0.0;     // 3 x the forward
    double hardware = 0.0;  // model, plus the forward recomputed
};

// For `config` on `pipelines` (their stages' recompute flags, each pipeline weighted by its microbatches).
FlopsPerToken flopsPerToken(const arch::ModelConfig& config, const std::vector<PipelinePlacement>& pipelines);

struct DevicePeak {
    std::string name;       // as matched
    double bf16 = 0.0;      // dense TFLOP/s
    double tf32 = 0.0;      // dense TFLOP/s, what fp32 matmuls run at
};

// The published dense peaks of common accelerators, matched in the device's
// name as CUDA or ROCm reports it ("NVIDIA H100 80GB HBM3"); none: nullptr.
const DevicePeak* devicePeakOf(const std::string& deviceName);
const std::vector<DevicePeak>& devicePeaks();

}  // namespace kiln::plan
