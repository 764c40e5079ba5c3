// Tensor parallelism inside a stage (Megatron-LM's scheme): a stage spans
// `width` ranks of one node, each holding a shard of every split parameter
// (see shard_spec.hpp). Activations between layers are whole on every rank of
// the stage; inside a layer a column-split matmul needs its input whole (f:
// identity forward, sum of the gradient backward) and a row-split one leaves
// partial sums (g: sum forward, identity backward). The output layer's logits
// stay split over the vocabulary: the cross-entropy is computed from per-rank
// maxima and sums without gathering them.
#pragma once

#include "kiln/arch/shard_spec.hpp"

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <vector>

namespace kiln::model {

// This rank's place in its stage, shared by the stage's layers and updated
// when the stage is (re)connected.
struct TensorSlice {
    int rank = 0, width = 1;
    // Sums a contiguous float32 tensor in place over the stage's ranks, the
    // same result on every rank. Set by whoever connects the stage.
    std::function<void(torch::Tensor&)> allReduce;
    bool split() const { return width > 1; }
};
using SliceHandle = std::shared_ptr<TensorSlice>;

// f: the identity forward; its gradient summed over the stage's ranks backward.
torch::Tensor copyToSlices(const torch::Tensor& x, TensorSlice& slice);
// g: summed over the stage's ranks forward; the identity backward.
torch::Tensor sumOverSlices(const torch::Tensor& x, TensorSlice& slice);
// Summed cross-entropy of logits split over the vocabulary: `logits` (..., Vt)
// are this rank's columns, vocabulary ids [vocabFirst, vocabFirst + Vt);
// `targets` (...) are whole. The same scalar on every rank of the stage.
torch::Tensor vocabParallelCrossEntropySum(const torch::Tensor& logits, const torch::Tensor& targets,
                                           std::int64_t vocabFirst, TensorSlice& slice);

// Views of units `want` (a part of `heldRange`) of `held`, the part of a
// parameter covering units `heldRange`: one view per group (contiguous only
// when the split is along dimension 0 and there is one group). A replicated
// parameter gives `held` itself.
std::vector<torch::Tensor> unitViews(const torch::Tensor& held, const arch::ShardSpec& spec, arch::UnitRange heldRange,
                                     arch::UnitRange want);
// Rank `index`'s shard of the whole parameter `full` for a stage of `width` (a copy).
torch::Tensor shardOf(const torch::Tensor& full, const arch::ShardSpec& spec, std::int64_t width, std::int64_t index);

}  // namespace kiln::model
