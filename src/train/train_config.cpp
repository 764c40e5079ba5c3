#include "kiln/train/train_config.hpp"

#include "kiln/config/deck.hpp"

#include <cmath>

namespace kiln::train {

TrainConfig trainConfigFromDeck(const config::Deck& deck) {
    TrainConfig c;
    c.steps = static_cast<std::uint64_t>(deck.integer("run.steps"));
    c.microBatch = static_cast<std::uint64_t>(deck.integer("train.micro_batch"));
    c.lr = deck.real("train.lr");
    c.minLr = deck.real("train.min_lr");
    c.warmupSteps = static_cast<std::uint64_t>(deck.integer("train.warmup_steps"));
    c.decaySteps = static_cast<std::uint64_t>(deck.integer("train.decay_steps"));
    c.beta1 = deck.real("train.beta1");
    c.beta2 = deck.real("train.beta2");
    c.eps = deck.real("train.eps");
    c.weightDecay = deck.real("train.weight_decay");
    c.gradClip = deck.real("train.grad_clip");
    c.threads = static_cast<int>(deck.integer("train.threads"));
    c.device = deck.text("train.device");
    c.precision = deck.text("train.precision");
    c.gradSums = deck.text("train.grad_sums");
    c.logEvery = static_cast<std::uint64_t>(deck.integer("train.log_every"));
    c.evalEvery = static_cast<std::uint64_t>(deck.integer("train.eval_every"));
    c.evalBatches = static_cast<std::uint64_t>(deck.integer("train.eval_batches"));
    c.checkpointEvery = static_cast<std::uint64_t>(deck.integer("checkpoint.every"));
    c.checkpointKeep = static_cast<std::uint64_t>(deck.integer("checkpoint.keep"));
    c.checkpointParallel = deck.flag("checkpoint.parallel");
    c.checkpointBackground = deck.flag("checkpoint.background");
    c.resume = deck.flag("checkpoint.resume");
    c.resumeFrom = deck.text("checkpoint.from");
    c.initFrom = deck.text("model.init_from");
    c.stepTimeout = deck.real("fault.step_timeout_s");
    c.stepDeadlineSteps = deck.real("fault.step_deadline");
    c.stepDeadlineFloor = deck.real("fault.step_deadline_floor_s");
    c.ncclTimeout = deck.real("fault.nccl_timeout_s");
    return c;
}

double learningRate(const TrainConfig& c, std::uint64_t step) {
    if (step < c.warmupSteps) return c.lr * double(step + 1) / double(c.warmupSteps);
    const std::uint64_t decay = c.decaySteps > 0 ? c.decaySteps : (c.steps > c.warmupSteps ? c.steps - c.warmupSteps : 1);
    const double progress = std::min(1.0, double(step - c.warmupSteps) / double(decay));
    return c.minLr + 0.5 * (c.lr - c.minLr) * (1.0 + std::cos(M_PI * progress));
}

}  // namespace kiln::train
