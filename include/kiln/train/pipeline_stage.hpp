// One rank's stage of a pipeline: its layers, and the 1F1B schedule that runs
// the pipeline's microbatches through them. Activations go forward and their
// gradients backward through the transport to the neighbouring stages; their
// shapes follow from the deck and the layout (microbatch k has a known number
// of samples, seq_len tokens, d_model wide), so no sizes are exchanged.
#pragma once

#include "kiln/comm/transport.hpp"
#include "kiln/data/loader.hpp"
#include "kiln/fault/fault_injector.hpp"
#include "kiln/model/compute_clock.hpp"
#include "kiln/model/gpt.hpp"
#include "kiln/plan/layout.hpp"

#include <torch/torch.h>

#include <chrono>
#include <functional>

namespace kiln::train {

// What this rank did in one step.
struct StageWork {
    double lossSum = 0.0;  // summed cross-entropy of its microbatches (last stages only)
    double forward = 0.0, backward = 0.0;  // seconds computing
    double waiting = 0.0;  // seconds waiting for neighbours: the pipeline bubble as this rank sees it
    double sums = 0.0;  // seconds in gradient sums started during backward (layerDone)
    // The sums of what this rank sent to the next stage (activations) and the previous one (gradients) in the
    // step: two runs of a step that disagree are told apart stage by stage (numeric_guard.hpp).
    double forwardDigest = 0.0, backwardDigest = 0.0;
    double sentPeak = 0.0;  // the largest magnitude it sent (a flipped exponent bit makes it 1e30 and more)
};

class PipelineStage {
public:
    // `transport` connects the ranks of the layout's communicator;
    // `deviceDeadline` bounds the one wait a step makes for the device.
    PipelineStage(model::Gpt& model, const plan::Layout& layout, int rank, comm::Transport& transport,
                  torch::Device device, bool bf16, std::chrono::milliseconds deviceDeadline);

    // Forward and backward of every microbatch of this rank's pipeline for
    // `batch` (this rank's slice: the pipeline's samples on first and last
    // stages, nothing on the others), in 1F1B order. Gradients accumulate in
    // the layers' .grad(); each microbatch's loss is divided by `targetsPerStep`.
    // The last microbatch's backward goes one layer at a time, from the last,
    // and `layerDone(l)` runs as soon as model layer l's gradient is final
    // (where gradient sums start, overlapping the backward of the layers below).
    using LayerDone = std::function<void(std::uint32_t layer)>;
    StageWork run(const data::Batch& batch, double targetsPerStep, fault::FaultInjector& injector, std::uint64_t step,
                  const LayerDone& layerDone = {});

    // Forwards only, in microbatch order, without gradients: the held-out
    // loss of `batch` (summed cross-entropy; last stages' slot 0, else 0).
    // Activations go down the pipeline as in run(); nothing comes back.
    double evaluate(const data::Batch& batch);

private:
    struct InFlight {
        torch::Tensor input;   // what the stage received (ids on the first stage)
        torch::Tensor output;  // activation, or the loss on the last stage
        // The last microbatch only: each layer's input, cut from the previous
        // layer's output (the first is `input`), and each layer's output (the
        // last is `output`), so that backward can stop after every layer.
        std::vector<torch::Tensor> layerInputs, layerOutputs;
        // train.recompute = full: the forward kept nothing but each layer's
        // input (`layerInputs`) and, on the last stage, the targets; backward
        // runs each layer's forward again.
        bool recomputed = false;
        torch::Tensor targets;
    };
    void forward(std::uint64_t local, const data::Batch& batch, StageWork& work);
    void backward(std::uint64_t local, double targetsPerStep, StageWork& work);
    // The backward of a microbatch whose forward was cut at every layer.
    void backwardByLayer(InFlight& slot, const torch::Tensor& gradient, double targetsPerStep, StageWork& work);
    // The backward of a recomputed microbatch, layer by layer from the last
    // (`layerDone` after each when `final`): returns the gradient of its input.
    torch::Tensor backwardRecomputed(InFlight& slot, torch::Tensor gradient, double targetsPerStep, StageWork& work,
                                     bool final);
    // Calls layerDone_ for model layer `k` of this stage, its time counted as sums.
    void layerFinished(std::size_t k, StageWork& work);
    // `direction`: a training forward's activation or backward's gradient (digested for the step's check, and
    // where a "corrupt" fault strikes) or an evaluation's activation.
    enum class Sent { Forward, Backward, Evaluation };
    void send(torch::Tensor tensor, int peer, Sent direction);
    fault::FaultInjector* injector_ = nullptr;  // during run()
    const LayerDone* layerDone_ = nullptr;  // during run()
    std::uint64_t cutMicrobatch_ = ~0ull;  // the local microbatch whose forward is cut at every layer
    std::uint64_t step_ = 0;
    bool sentThisStep_ = false;
    torch::Tensor receive(std::int64_t samples, int peer, StageWork& work);
    std::int64_t samplesOf(std::uint64_t local) const;
    // This step's token ids (first and last stages), on the device, int32.
    void loadTokens(const data::Batch& batch);
    // Microbatch `local`'s ids (b, seq_len + 1) as int64.
    torch::Tensor tokensOf(const data::Batch& batch, std::uint64_t local, std::int64_t b) const;
    void releaseFinishedSends();

    model::Gpt& model_;
    const plan::Layout& layout_;
    plan::RankRole role_;
    const plan::PipelinePlacement* pipeline_ = nullptr;
    comm::Transport& transport_;
    torch::Device device_;
    bool bf16_;
    std::vector<InFlight> inFlight_;
    torch::Tensor tokens_, pinnedTokens_;
    torch::Tensor lossSum_;  // float64, on the device
    torch::Tensor sentForward_, sentBackward_;  // float64 sums of what was sent, on the device
    torch::Tensor sentPeak_;                    // the largest magnitude sent, on the device
    std::vector<std::pair<std::uint64_t, torch::Tensor>> sending_;  // ticket, buffer kept alive
    // The step's forwards and backwards between marks of the device's clock,
    // less the seconds of gradient sums inside them; added up when the step ends.
    model::ComputeClock clock_;
    struct Computed {
        model::ComputeClock::Mark from, to;
        bool forward;
        double notCompute;
    };
    std::vector<Computed> computed_;
};

}  // namespace kiln::train
