#include "kiln/train/adamw.hpp"

#include <cmath>

namespace kiln::train {

AdamW::AdamW(model::Gpt& model, const TrainConfig& config) : model_(model), config_(config) {
    // Gradients first, then both moments, all before the first step: what
    // lives for the whole run is allocated together, below the activations
    // that come and go every step. Left to the first backward pass, the
    // gradients would take the places of freed activations and the next
    // step's activations new ones: the heap would grow by about a step's
    // activations more than the stage ever holds at once.
    for (auto& p : model.parameters())
        if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
    for (std::uint32_t l = 0; l < model.numLayers(); ++l) {
        m_.emplace_back();
        v_.emplace_back();
        for (auto& p : model.layer(l).parameters()) {
            m_.back().push_back(torch::zeros_like(p));
            v_.back().push_back(torch::zeros_like(p));
        }
    }
}

void AdamW::step(double lr) {
    torch::NoGradGuard noGrad;
    ++steps_;
    const double correction1 = 1.0 - std::pow(config_.beta1, double(steps_));
    const double correction2 = 1.0 - std::pow(config_.beta2, double(steps_));
    // One multi-tensor call per operation over a layer's parameters at a
    // time (on a GPU a handful of kernel launches per layer, not per
    // tensor); the arithmetic is that of the per-tensor form, in its order.
    // Layer by layer, the update's temporary (the denominators) is one
    // layer's size, not the stage's: the memory model counts the largest
    // layer's parameters for it.
    for (std::uint32_t l = 0; l < model_.numLayers(); ++l) {
        std::vector<torch::Tensor> params, grads, m, v, decayed;
        auto layerParams = model_.layer(l).parameters();
        for (std::size_t k = 0; k < layerParams.size(); ++k) {
            auto& p = layerParams[k];
            if (!p.grad().defined()) continue;
            params.push_back(p);
            grads.push_back(p.grad());
            m.push_back(m_[l][k]);
            v.push_back(v_[l][k]);
            // Norms, biases (1-D) are not decayed; matrices and embeddings are.
            if (p.dim() >= 2) decayed.push_back(p);
        }
        if (params.empty()) continue;
        if (config_.weightDecay > 0.0 && !decayed.empty()) at::_foreach_mul_(decayed, 1.0 - lr * config_.weightDecay);
        at::_foreach_mul_(m, config_.beta1);
        at::_foreach_add_(m, grads, 1.0 - config_.beta1);
        at::_foreach_mul_(v, config_.beta2);
        at::_foreach_addcmul_(v, grads, grads, 1.0 - config_.beta2);
        auto denominators = at::_foreach_div(v, correction2);
        at::_foreach_sqrt_(denominators);
        at::_foreach_add_(denominators, config_.eps);
        at::_foreach_addcdiv_(params, m, denominators, -lr / correction1);
    }
}

}  // namespace kiln::train
