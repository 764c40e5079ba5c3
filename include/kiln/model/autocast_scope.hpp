// bf16 autocast for a forward pass: matmuls in bfloat16, reductions, norms
// and the loss in fp32; parameters and gradients stay fp32.
#pragma once

#include <ATen/autocast_mode.h>
#include <torch/torch.h>

namespace kiln::model {

class AutocastScope {
public:
    // Autocast keeps the bf16 copy of each weight it casts. ClearOnExit drops
    // them when the scope ends; KeepForStep leaves them for the next
    // microbatch's forward (the weights do not change within a step), and the
    // caller clears them with clearCache() before the weights change.
    enum class Cache { ClearOnExit, KeepForStep };

    AutocastScope(bool enabled, const torch::Device& device, Cache cache = Cache::ClearOnExit)
        : enabled_(enabled), cuda_(device.is_cuda()), cache_(cache) {
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
        clearCache(cache_ == Cache::ClearOnExit);
    }
    AutocastScope(const AutocastScope&) = delete;
    AutocastScope& operator=(const AutocastScope&) = delete;

    static void clearCache(bool bf16) {
        if (bf16) at::autocast::clear_cache();
    }

private:
    bool enabled_, cuda_;
    Cache cache_;
};

}  // namespace kiln::model
