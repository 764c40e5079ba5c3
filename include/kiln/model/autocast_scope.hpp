// bf16 autocast for a forward pass: matmuls in bfloat16, reductions, norms
// and the loss in fp32; parameters and gradients stay fp32.
#pragma once

#include <ATen/autocast_mode.h>
#include <torch/torch.h>
#include <torch/version.h>

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
        setBf16(true);
    }
    ~AutocastScope() {
        if (!enabled_) return;
        setBf16(false);
        clearCache(cache_ == Cache::ClearOnExit);
    }
    AutocastScope(const AutocastScope&) = delete;
    AutocastScope& operator=(const AutocastScope&) = delete;

    static void clearCache(bool bf16) {
        if (bf16) at::autocast::clear_cache();
    }

private:
    void setBf16(bool on) const {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
        // libtorch 2.4 names the device; its per-device calls are deprecated since.
        const auto type = cuda_ ? at::kCUDA : at::kCPU;
        if (on) at::autocast::set_autocast_dtype(type, at::kBFloat16);
        at::autocast::set_autocast_enabled(type, on);
#else
        if (on) cuda_ ? at::autocast::set_autocast_gpu_dtype(at::kBFloat16) : at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
        cuda_ ? at::autocast::set_enabled(on) : at::autocast::set_cpu_enabled(on);
#endif
    }

    bool enabled_, cuda_;
    Cache cache_;
};

}  // namespace kiln::model
