#include "kiln/model/profiler.hpp"

#include "kiln/model/autocast_scope.hpp"
#include "kiln/model/compute_threads.hpp"
#include "kiln/model/device.hpp"
#include "kiln/model/gpt.hpp"

#include <algorithm>
#include <chrono>

namespace kiln::model {
namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

}  // namespace

plan::ModelProfile profileModel(const ModelConfig& config, std::uint64_t microBatch, int repeat, int threads,
                                torch::Device device, bool bf16, bool eachKindOnce) {
    if (threads >= 0) useComputeThreads(threads, 1);
    plan::ModelProfile profile{config, microBatch, device.is_cuda() ? "cuda" : "cpu", {}};
    const auto B = static_cast<std::int64_t>(microBatch), T = static_cast<std::int64_t>(config.seqLen);
    const auto on = torch::TensorOptions().device(device);
    const std::uint32_t L = config.numLayers();
    for (std::uint32_t i = 0; i < L; ++i) {
        if (eachKindOnce && i > 1 && i + 1 < L) {
            auto block = profile.layers[1];
            block.activationBytes = plan::activationBytesEstimate(config, i, microBatch);
            block.paramBytes = config.parametersOf(i) * 4;
            profile.layers.push_back(block);
            continue;
        }
        Layer layer = buildLayer(config, i);
        layer->to(device);
        torch::Tensor input = i == 0 ? torch::randint(0, config.vocabSize, {B, T}, on.dtype(torch::kInt64))
                                     : torch::randn({B, T, static_cast<std::int64_t>(config.dModel)}, on);
        std::vector<double> forward, backward;
        torch::Tensor output;
        for (int r = 0; r <= repeat; ++r) {
            auto x = i == 0 ? input : input.clone().requires_grad_(true);
            waitForDevice(device);
            const auto t0 = Clock::now();
            {
                AutocastScope autocast(bf16, device);
                output = layer->forward(x);
            }
            waitForDevice(device);
            const auto t1 = Clock::now();
            output.backward(torch::ones_like(output));
            waitForDevice(device);
            const auto t2 = Clock::now();
            layer->zero_grad();
            if (r == 0) continue;  // warm-up
            forward.push_back(std::chrono::duration<double>(t1 - t0).count());
            backward.push_back(std::chrono::duration<double>(t2 - t1).count());
        }
        profile.layers.push_back({layer->kind(), median(forward), median(backward), config.parametersOf(i) * 4,
                                  static_cast<std::uint64_t>(output.numel()) * 4,
                                  plan::activationBytesEstimate(config, i, microBatch)});
    }
    return profile;
}

}  // namespace kiln::model
