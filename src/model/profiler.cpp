#include "kiln/model/profiler.hpp"

#include "kiln/base/resident_memory.hpp"
#include "kiln/model/autocast_scope.hpp"
#include "kiln/model/compute_threads.hpp"
#include "kiln/model/cpu_allocations.hpp"
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

// What the layers cost inside a step rather than alone: a model of the same
// shape with up to four blocks (embedding, blocks, head) runs forward, the loss and
// backward as a pipeline stage runs them, and its parameters get an AdamW
// update (the same multi-tensor operations as train/adamw.cpp). Per
// microbatch: each layer's forward in the chain, the loss, the whole
// backward; per step: the update per parameter byte.
struct InStep {
    std::vector<double> forward;  // embedding, one block (the mean of the chain's), head
    double loss = 0.0, backward = 0.0, updatePerByte = 0.0;
    std::int64_t lossBytes = 0;   // what the loss keeps for backward (host memory, counted)
    std::uint32_t blocks = 1;     // in the chain
};

InStep measureInStep(const arch::ModelConfig& config, std::uint64_t microBatch, int repeat, torch::Device device, bool bf16) {
    arch::ModelConfig one = config;
    one.blocks = std::min<std::uint32_t>(config.blocks, 4);
    Gpt chain(one);
    chain.to(device);
    const auto B = static_cast<std::int64_t>(microBatch), T = static_cast<std::int64_t>(config.seqLen);
    const auto ids = torch::randint(0, config.vocabSize, {B, T + 1}, torch::TensorOptions().device(device).dtype(torch::kInt64));
    const auto inputs = ids.slice(1, 0, T), targets = ids.slice(1, 1, T + 1);
    std::vector<torch::Tensor> params = chain.parameters(), m, v;
    double bytes = 0.0;
    for (const auto& p : params) {
        m.push_back(torch::zeros_like(p));
        v.push_back(torch::zeros_like(p));
        bytes += double(p.numel()) * 4.0;
    }
    const std::uint32_t layers = chain.numLayers();
    std::vector<std::vector<double>> forward(3);
    std::vector<double> loss, backward, update;
    std::int64_t lossBytes = 0;
    for (int r = 0; r <= repeat; ++r) {
        std::vector<double> f;
        torch::Tensor x = inputs, total;
        {
            AutocastScope autocast(bf16, device);
            // Embedding, the blocks' mean, head.
            f.assign(3, 0.0);
            for (std::uint32_t k = 0; k < layers; ++k) {
                const auto t0 = Clock::now();
                x = chain.layer(k).forward(x);
                waitForDevice(device);
                const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
                f[k == 0 ? 0 : k + 1 == layers ? 2 : 1] += k == 0 || k + 1 == layers ? seconds : seconds / (layers - 2);
            }
            const auto t0 = Clock::now();
            const auto before = cpuAllocatedBytes();
            total = chain.lossSum(x, targets);
            waitForDevice(device);
            f.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
            lossBytes = std::max(lossBytes, cpuAllocatedBytes() - before);
        }
        const auto t1 = Clock::now();
        (total / double(B * T)).backward();
        waitForDevice(device);
        const auto t2 = Clock::now();
        {
            torch::NoGradGuard noGrad;
            std::vector<torch::Tensor> grads;
            for (auto& p : params) grads.push_back(p.grad());
            at::_foreach_mul_(params, 1.0 - 1e-8);
            at::_foreach_mul_(m, 0.9);
            at::_foreach_add_(m, grads, 0.1);
            at::_foreach_mul_(v, 0.999);
            at::_foreach_addcmul_(v, grads, grads, 0.001);
            auto denominators = at::_foreach_div(v, 0.5);
            at::_foreach_sqrt_(denominators);
            at::_foreach_add_(denominators, 1e-8);
            at::_foreach_addcdiv_(params, m, denominators, -1e-12);
            waitForDevice(device);
        }
        const auto t3 = Clock::now();
        for (auto& p : params) p.mutable_grad() = torch::Tensor();
        if (r == 0) continue;  // warm-up
        for (std::uint32_t k = 0; k < 3; ++k) forward[k].push_back(f[k]);
        loss.push_back(f[3]);
        backward.push_back(std::chrono::duration<double>(t2 - t1).count());
        update.push_back(std::chrono::duration<double>(t3 - t2).count());
    }
    InStep out;
    for (auto& f : forward) out.forward.push_back(median(f));
    out.loss = median(loss);
    out.backward = median(backward);
    out.blocks = layers - 2;
    out.lossBytes = lossBytes;
    out.updatePerByte = median(update) / std::max(bytes, 1.0);
    return out;
}

}  // namespace

plan::ModelProfile profileModel(const arch::ModelConfig& config, std::uint64_t microBatch, int repeat, int threads,
                                torch::Device device, bool bf16, bool eachKindOnce) {
    if (threads >= 0) useComputeThreads(threads, 1);
    plan::ModelProfile profile{config, microBatch, device.is_cuda() ? "cuda" : "cpu", {}};
    const auto residentBefore = base::residentBytes();
    const auto heldBefore = cpuHeldBytes();
    resetCpuPeak();
    const auto B = static_cast<std::int64_t>(microBatch), T = static_cast<std::int64_t>(config.seqLen);
    const auto on = torch::TensorOptions().device(device);
    const std::uint32_t L = config.numLayers();
    for (std::uint32_t i = 0; i < L; ++i) {
        if (eachKindOnce && i > 1 && i + 1 < L) {
            auto block = profile.layers[1];  // its bytes too: blocks are alike
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
        std::int64_t kept = 0;  // host bytes the forward left for the backward (its output included)
        for (int r = 0; r <= repeat; ++r) {
            auto x = i == 0 ? input : input.clone().requires_grad_(true);
            waitForDevice(device);
            const auto t0 = Clock::now();
            const auto before = cpuAllocatedBytes();
            {
                AutocastScope autocast(bf16, device);
                output = layer->forward(x);
            }
            waitForDevice(device);
            const auto t1 = Clock::now();
            kept = std::max(kept, cpuAllocatedBytes() - before);
            output.backward(torch::ones_like(output));
            waitForDevice(device);
            const auto t2 = Clock::now();
            layer->zero_grad();
            if (r == 0) continue;  // warm-up
            forward.push_back(std::chrono::duration<double>(t1 - t0).count());
            backward.push_back(std::chrono::duration<double>(t2 - t1).count());
        }
        // On the CPU, what the forward kept, counted; on a GPU the estimate (its allocator is not counted).
        const bool counted = !device.is_cuda() && kept > 0;
        profile.layers.push_back({layer->kind(), median(forward), median(backward), config.parametersOf(i) * 4,
                                  static_cast<std::uint64_t>(output.numel()) * 4,
                                  counted ? static_cast<std::uint64_t>(kept)
                                          : plan::activationBytesEstimate(config, i, microBatch)});
        layer = nullptr;
        input = output = torch::Tensor();
        releaseCpuCache();  // the next layer's sizes are others
    }
    // Alone, a layer runs faster than in a step (warm caches, no loss, no
    // graph of the layers around it): its times are scaled to the chain's,
    // forward and backward apart, and the loss goes to the head.
    const InStep step = measureInStep(config, microBatch, repeat, device, bf16);
    const auto& head = profile.layers.back();
    const double aloneForward = profile.layers[0].forwardSeconds + profile.layers[1].forwardSeconds + head.forwardSeconds;
    const double aloneBackward =
        profile.layers[0].backwardSeconds + step.blocks * profile.layers[1].backwardSeconds + head.backwardSeconds;
    const double forwardScale = aloneForward > 0 ? (step.forward[0] + step.forward[1] + step.forward[2]) / aloneForward : 1.0;
    const double backwardScale = aloneBackward > 0 ? step.backward / aloneBackward : 1.0;
    for (auto& layer : profile.layers) {
        layer.forwardSeconds *= forwardScale;
        layer.backwardSeconds *= backwardScale;
        layer.optimizerSeconds = step.updatePerByte * double(layer.paramBytes);
    }
    profile.layers.back().forwardSeconds += step.loss;
    if (!device.is_cuda() && step.lossBytes > 0) profile.layers.back().activationBytes += static_cast<std::uint64_t>(step.lossBytes);
    // What a rank holds besides its tensors: the resident growth beyond the
    // tensors' own pages (kept blocks included).
    releaseCpuCache();
    if (!device.is_cuda()) {
        const auto peak = base::peakResidentBytes();
        const auto tensors = std::max<std::int64_t>(cpuPeakHeldBytes() - heldBefore, 0);
        const auto grown = peak > residentBefore ? peak - residentBefore : 0;
        profile.runtimeBytes = grown > std::uint64_t(tensors) ? grown - std::uint64_t(tensors) : 0;
    }
    return profile;
}

}  // namespace kiln::model
