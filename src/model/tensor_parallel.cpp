#include "kiln/model/tensor_parallel.hpp"

#include "kiln/base/error.hpp"

#include <fmt/format.h>

namespace kiln::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

TensorSlice& sliceOf(AutogradContext* ctx) {
    return *reinterpret_cast<TensorSlice*>(ctx->saved_data["slice"].toInt());
}

torch::Tensor summed(const torch::Tensor& x, TensorSlice& slice) {
    auto sum = x.to(torch::kFloat32).contiguous().clone();
    slice.allReduce(sum);
    return sum.to(x.scalar_type());
}

struct CopyToSlices : torch::autograd::Function<CopyToSlices> {
    static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, TensorSlice* slice) {
        ctx->saved_data["slice"] = reinterpret_cast<std::int64_t>(slice);
        return x.view_as(x);
    }
    static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
        return {summed(grads[0], sliceOf(ctx)), torch::Tensor()};
    }
};

struct SumOverSlices : torch::autograd::Function<SumOverSlices> {
    static torch::Tensor forward(AutogradContext*, const torch::Tensor& x, TensorSlice* slice) { return summed(x, *slice); }
    static tensor_list backward(AutogradContext*, tensor_list grads) { return {grads[0], torch::Tensor()}; }
};

struct VocabParallelCrossEntropy : torch::autograd::Function<VocabParallelCrossEntropy> {
    // logits (N, Vt) float32, targets (N) int64.
    static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& logits, const torch::Tensor& targets,
                                 std::int64_t vocabFirst, TensorSlice* slice) {
        torch::NoGradGuard noGrad;
        const auto N = logits.size(0), Vt = logits.size(1);
        // The row maxima over the whole vocabulary (for a stable exponent):
        // each rank fills its row of a (width, N) table and the sum gathers them.
        auto maxima = torch::zeros({slice->width, N}, logits.options());
        maxima[slice->rank].copy_(std::get<0>(logits.max(1)));
        slice->allReduce(maxima);
        const auto shifted = logits - std::get<0>(maxima.max(0)).unsqueeze(1);
        const auto exps = shifted.exp();
        const auto local = targets - vocabFirst;
        const auto mine = (local >= 0).logical_and(local < Vt);
        const auto index = local.clamp(0, std::max<std::int64_t>(Vt - 1, 0)).unsqueeze(1);
        // Each row's sum of exponentials and its target's shifted logit (on the rank that holds it), summed at once.
        auto sums = torch::stack({exps.sum(1), shifted.gather(1, index).squeeze(1) * mine}).contiguous();
        slice->allReduce(sums);
        ctx->save_for_backward({exps / sums[0].unsqueeze(1), index, mine});
        return (sums[0].log() - sums[1]).sum();
    }
    static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
        const auto saved = ctx->get_saved_variables();
        // d loss / d logit = softmax - one-hot(target), scaled by the incoming gradient.
        auto grad = saved[0].clone();
        grad.scatter_add_(1, saved[1], -saved[2].to(grad.scalar_type()).unsqueeze(1));
        return {grad * grads[0], torch::Tensor(), torch::Tensor(), torch::Tensor()};
    }
};

}  // namespace

torch::Tensor copyToSlices(const torch::Tensor& x, TensorSlice& slice) {
    return slice.split() ? CopyToSlices::apply(x, &slice) : x;
}

torch::Tensor sumOverSlices(const torch::Tensor& x, TensorSlice& slice) {
    return slice.split() ? SumOverSlices::apply(x, &slice) : x;
}

torch::Tensor vocabParallelCrossEntropySum(const torch::Tensor& logits, const torch::Tensor& targets,
                                           std::int64_t vocabFirst, TensorSlice& slice) {
    return VocabParallelCrossEntropy::apply(logits.reshape({-1, logits.size(-1)}).to(torch::kFloat32),
                                            targets.reshape({-1}), vocabFirst, &slice);
}

std::vector<torch::Tensor> unitViews(const torch::Tensor& held, const arch::ShardSpec& spec, arch::UnitRange heldRange,
                                     arch::UnitRange want) {
    if (spec.replicated()) return {held};
    if (want.first < heldRange.first || want.end > heldRange.end)
        throw Error(fmt::format("units [{}, {}) are not within the held [{}, {})", want.first, want.end, heldRange.first,
                                heldRange.end),
                    ErrorScope::ThisRank);
    std::vector<torch::Tensor> views;
    const std::int64_t perGroup = heldRange.count() * spec.unitSize;
    for (std::int64_t g = 0; g < spec.groups; ++g)
        views.push_back(held.narrow(spec.dim, g * perGroup + (want.first - heldRange.first) * spec.unitSize,
                                    want.count() * spec.unitSize));
    return views;
}

torch::Tensor shardOf(const torch::Tensor& full, const arch::ShardSpec& spec, std::int64_t width, std::int64_t index) {
    if (spec.replicated() || width == 1) return full.clone();
    const auto views = unitViews(full, spec, {0, spec.units}, arch::unitRange(spec.units, width, index));
    return torch::cat(views, spec.dim).contiguous();
}

}  // namespace kiln::model
