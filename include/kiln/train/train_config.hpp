// Optimisation settings from the deck, and the learning-rate schedule.
#pragma once

#include <chrono>

#include <cstdint>
#include <string>

namespace kiln::config {
class Deck;
}

namespace kiln::train {

struct TrainConfig {
    std::uint64_t steps = 100;
    std::uint64_t microBatch = 4;
    double lr = 3e-3, minLr = 3e-4;
    std::uint64_t warmupSteps = 10, decaySteps = 0;  // 0: decay until `steps`
    double beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weightDecay = 0.1, gradClip = 1.0;
    int threads = 0;
    std::string device = "cpu";     // cpu, cuda, auto
    std::string precision = "fp32";  // fp32, bf16
    std::string gradSums = "auto";   // auto, during_backward, after_backward
    std::uint64_t logEvery = 1;
    std::uint64_t evalEvery = 0;    // train.eval_every (0: after the last step only)
    std::uint64_t evalBatches = 4;  // train.eval_batches
    std::uint64_t checkpointEvery = 0, checkpointKeep = 3;
    bool checkpointParallel = true;    // part files written by the holders (format 2), or one file by rank 0
    bool checkpointBackground = true;  // periodic checkpoints written while training goes on
    bool resume = true;
    double stepTimeout = 0.0;    // fault.step_timeout_s; 0: automatic
    double stepDeadlineSteps = 3.0;   // fault.step_deadline: times the median step
    double stepDeadlineFloor = 10.0;  // fault.step_deadline_floor_s
    double ncclTimeout = 120.0;  // fault.nccl_timeout_s
    // The longest any wait for the GPU may take (NCCL's and the compute's).
    std::chrono::milliseconds deviceDeadline() const {
        return std::chrono::milliseconds{static_cast<long long>(1e3 * ncclTimeout)};
    }
    std::string resumeFrom;  // a checkpoint file; empty: the one `latest` names
    std::string initFrom;    // a Hugging Face model directory a fresh start takes its weights from
};

TrainConfig trainConfigFromDeck(const config::Deck& deck);

// Linear warm-up to `lr` over warmupSteps, then cosine decay to `minLr` over
// decaySteps, then `minLr`. A pure function of the step: a resumed run
// continues the schedule without any saved state.
double learningRate(const TrainConfig& config, std::uint64_t step);

}  // namespace kiln::train
