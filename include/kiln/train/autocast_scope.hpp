// bf16 autocast for a forward pass: matmuls in bfloat16, reductions, norms
// and the loss in fp32; parameters and gradients stay fp32.
#pragma once

#include <ATen/autocast_mode.h>
#include <torch/torch.h>

namespace kiln::train {

class AutocastScope {
public:
    AutocastScope(bool enabled, const torch::Device& device) : enabled_(enabled), cuda_(device.is_cuda()) {
        if (!enabled_) return;
        if (cuda_) {
            at::autocast::set_autocast_gpu_dtype(at::kBFloat16);
            at::autocast::set_enabled(true);
        } else {
            at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
            at::autocast::set_cpu_enabled(true);
        }
    }
    ~AutocastScope() {
        if (!enabled_) return;
        cuda_ ? at::autocast::set_enabled(false) : at::autocast::set_cpu_enabled(false);
        at::autocast::clear_cache();
    }
    AutocastScope(const AutocastScope&) = delete;
    AutocastScope& operator=(const AutocastScope&) = delete;

private:
    bool enabled_, cuda_;
};

}  // namespace kiln::train
