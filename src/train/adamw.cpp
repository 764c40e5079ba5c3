#include "kiln/train/adamw.hpp"

#include <cmath>

namespace kiln::train {

AdamW::AdamW(model::Gpt& model, const TrainConfig& config) : model_(model), config_(config) {
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
    // One multi-tensor call per operation over all of the rank's parameters
    // (on a GPU a handful of kernel launches per step, not a handful per
    // tensor); the arithmetic is that of the per-tensor form, in its order.
    std::vector<torch::Tensor> params, grads, m, v, decayed;
    for (std::uint32_t l = 0; l < model_.numLayers(); ++l) {
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
    }
    if (params.empty()) return;
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

}  // namespace kiln::train
