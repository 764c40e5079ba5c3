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
    for (std::uint32_t l = 0; l < model_.numLayers(); ++l) {
        auto params = model_.layer(l).parameters();
        for (std::size_t k = 0; k < params.size(); ++k) {
            auto& p = params[k];
            if (!p.grad().defined()) continue;
            const auto& g = p.grad();
            // Norms, biases (1-D) are not decayed; matrices and embeddings are.
            if (p.dim() >= 2 && config_.weightDecay > 0.0) p.mul_(1.0 - lr * config_.weightDecay);
            m_[l][k].mul_(config_.beta1).add_(g, 1.0 - config_.beta1);
            v_[l][k].mul_(config_.beta2).addcmul_(g, g, 1.0 - config_.beta2);
            auto denominator = (v_[l][k] / correction2).sqrt_().add_(config_.eps);
            p.addcdiv_(m_[l][k], denominator, -lr / correction1);
        }
    }
}

}  // namespace kiln::train
