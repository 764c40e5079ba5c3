// AdamW with decoupled weight decay, written out rather than taken from
// torch::optim: its moments are plain per-layer tensors that checkpoints save
// and that recovery can copy between replicas layer by layer.
#pragma once

#include "kiln/model/gpt.hpp"
#include "kiln/train/train_config.hpp"

#include <torch/torch.h>

#include <vector>

namespace kiln::train {

class AdamW {
public:
    AdamW(model::Gpt& model, const TrainConfig& config);

    // One update with learning rate `lr`, from the parameters' .grad().
    void step(double lr);

    std::uint64_t steps() const { return steps_; }
    void setSteps(std::uint64_t steps) { steps_ = steps; }
    // Moments of local layer `layer`, in the order of its parameters().
    std::vector<torch::Tensor>& firstMoments(std::uint32_t layer) { return m_[layer]; }
    std::vector<torch::Tensor>& secondMoments(std::uint32_t layer) { return v_[layer]; }

private:
    model::Gpt& model_;
    TrainConfig config_;
    std::uint64_t steps_ = 0;
    std::vector<std::vector<torch::Tensor>> m_, v_;
};

}  // namespace kiln::train
