#include "kiln/train/pipeline_stage.hpp"

#include "bit_flip.hpp"

#include "kiln/base/log.hpp"
#include "kiln/model/autocast_scope.hpp"
#include "kiln/model/cpu_allocations.hpp"

#include <algorithm>
#include <chrono>
#include <limits>

namespace kiln::train {

using Clock = std::chrono::steady_clock;

namespace {

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

PipelineStage::PipelineStage(model::Gpt& model, const plan::Layout& layout, int rank, comm::Transport& transport,
                             torch::Device device, bool bf16, std::chrono::milliseconds deviceDeadline)
    : model_(model), layout_(layout), role_(layout.role(rank)), transport_(transport),
      device_(device), bf16_(bf16), clock_(device, deviceDeadline) {
    if (!role_.idle()) pipeline_ = &layout.pipelines[static_cast<std::size_t>(role_.pipeline)];
}

void PipelineStage::loadTokens(const data::Batch& batch) {
    tokens_ = torch::Tensor();
    if (batch.tokens.empty()) return;  // a middle stage: no token ids
    // Token ids are below 2^31, so the uint32 buffer reads as int32: the
    // slice crosses to the device once per step, at half the bytes of int64,
    // and each microbatch converts on the device.
    const auto rows = static_cast<std::int64_t>(batch.tokens.size() / batch.sampleLength);
    auto host = torch::from_blob(const_cast<std::uint32_t*>(batch.tokens.data()),
                                 {rows, static_cast<std::int64_t>(batch.sampleLength)}, torch::kInt32);
    if (device_.is_cuda()) {
        pinnedTokens_ = host.pin_memory();  // kept until the next step: the copy below is asynchronous
        tokens_ = pinnedTokens_.to(device_, /*non_blocking=*/true);
    } else {
        tokens_ = host;  // batch outlives the step
    }
}

torch::Tensor PipelineStage::tokensOf(const data::Batch& batch, std::uint64_t local, std::int64_t b) const {
    const auto offset = static_cast<std::int64_t>(layout_.microbatchBegin(pipeline_->firstMicrobatch + local) - batch.first);
    return tokens_.slice(0, offset, offset + b).to(torch::kInt64);
}

std::int64_t PipelineStage::samplesOf(std::uint64_t local) const {
    const std::uint64_t k = pipeline_->firstMicrobatch + local;
    return static_cast<std::int64_t>(layout_.microbatchEnd(k) - layout_.microbatchBegin(k));
}

void PipelineStage::releaseFinishedSends() {
    const auto done = transport_.completedSends();
    if (done.empty()) return;
    sending_.erase(std::remove_if(sending_.begin(), sending_.end(),
                                  [&](const auto& s) { return std::find(done.begin(), done.end(), s.first) != done.end(); }),
                   sending_.end());
}

void PipelineStage::send(torch::Tensor tensor, int peer, Sent direction) {
    if (!sentThisStep_ && injector_) injector_->at(step_, fault::Phase::Send);
    sentThisStep_ = true;
    // Always fp32 and contiguous where the transport reads: the receiver expects exactly that.
    auto buffer = tensor.detach().to(transport_.deviceMemory() ? device_ : torch::Device(torch::kCPU), torch::kFloat32)
                      .contiguous();
    if (direction != Sent::Evaluation) {
        if (injector_ && injector_->strikes(step_, fault::Injection::Action::Corrupt)) {
            const float value = flipFirstValue(buffer);
            log::warn("fault injection: the first value this rank sends in step {} corrupted to {:g}", step_, value);
        }
        // The check's digest: one reduction of what is sent, read with the loss when the step ends.
        auto& digest = direction == Sent::Forward ? sentForward_ : sentBackward_;
        const auto sum = buffer.sum(torch::kFloat64);
        digest = digest.defined() ? digest + sum : sum;
        // The largest magnitude in one reduction, without a copy of the activation (NaN gives NaN).
        const auto peak = at::linalg_vector_norm(buffer, std::numeric_limits<double>::infinity()).to(torch::kFloat64);
        sentPeak_ = sentPeak_.defined() ? torch::maximum(sentPeak_, peak) : peak;
    }
    const auto ticket = transport_.sendAsync(buffer.data_ptr(), static_cast<std::size_t>(buffer.nbytes()), peer);
    sending_.emplace_back(ticket, std::move(buffer));
}

torch::Tensor PipelineStage::receive(std::int64_t samples, int peer, StageWork& work) {
    const auto t0 = Clock::now();
    const std::int64_t T = model_.config().seqLen, C = model_.config().dModel;
    auto where = torch::TensorOptions().dtype(torch::kFloat32).device(transport_.deviceMemory() ? device_ : torch::kCPU);
    auto buffer = torch::empty({samples, T, C}, where);
    transport_.recv(buffer.data_ptr(), static_cast<std::size_t>(buffer.nbytes()), peer);
    work.waiting += since(t0);
    return buffer.to(device_);
}

void PipelineStage::forward(std::uint64_t local, const data::Batch& batch, StageWork& work) {
    const std::int64_t b = samplesOf(local);
    InFlight& slot = inFlight_[local];
    torch::Tensor input;
    if (role_.first()) {
        // This microbatch's inputs (b, T): the loader slice starts at the pipeline's first sample.
        input = tokensOf(batch, local, b).slice(1, 0, static_cast<std::int64_t>(batch.sampleLength) - 1);
    } else {
        input = receive(b, role_.previous, work).requires_grad_(true);
    }
    const auto m0 = clock_.mark();
    torch::Tensor output;
    {
        // The weights' bf16 casts are kept from one microbatch to the next
        // (cleared when the step ends, before the optimizer changes the weights).
        model::AutocastScope autocast(bf16_, device_, model::AutocastScope::Cache::KeepForStep);
        if (role_.recompute || model_.config().recompute == arch::ModelConfig::Recompute::Full) {
            // Nothing of the layers' insides is kept: each layer's input is.
            torch::NoGradGuard noGrad;
            slot.recomputed = true;
            output = input;
            for (std::uint32_t k = 0; k < model_.numLayers(); ++k) {
                slot.layerInputs.push_back(output);
                output = model_.layer(k).forward(output);
            }
        } else if (local == cutMicrobatch_) {
            // The same arithmetic as one forward; each layer's input is a leaf
            // of its own, so backward can be run (and stopped) layer by layer.
            output = input;
            for (std::uint32_t k = 0; k < model_.numLayers(); ++k) {
                if (k > 0) output = output.detach().requires_grad_(true);
                slot.layerInputs.push_back(output);
                output = model_.layer(k).forward(output);
                slot.layerOutputs.push_back(output);
            }
        } else {
            output = model_.forward(input);
        }
        if (role_.last()) {
            const auto targets = tokensOf(batch, local, b).slice(1, 1, static_cast<std::int64_t>(batch.sampleLength));
            if (slot.recomputed) {
                torch::NoGradGuard noGrad;
                slot.targets = targets;
                output = model_.lossSum(output, targets);
            } else {
                output = model_.lossSum(output, targets);
            }
            // Injected numeric faults: a NaN in the loss (and so in every gradient behind it).
            if (injector_->strikes(step_, fault::Injection::Action::NanLoss) ||
                injector_->strikes(step_, fault::Injection::Action::Poison)) {
                log::warn("fault injection: a NaN in this rank's loss in step {}", step_);
                output = output + std::numeric_limits<double>::quiet_NaN();
            }
            if (!slot.layerOutputs.empty()) slot.layerOutputs.back() = output;
        }
    }
    // An injected straggler's lag is in proportion to what it computed: only then is the device waited for.
    if (injector_->slows(step_))
        injector_->straggle(step_, fault::Phase::Forward, clock_.seconds(m0, clock_.mark()));
    computed_.push_back({m0, clock_.mark(), /*forward=*/true, 0.0});
    if (role_.last()) {
        // Summed where it was computed; read once per step (a read is a device sync).
        const auto loss = output.detach().to(torch::kFloat64);
        lossSum_ = lossSum_.defined() ? lossSum_ + loss : loss;
    } else {
        send(output, role_.next, Sent::Forward);
    }
    slot.input = input;
    slot.output = output;
    releaseFinishedSends();
}

void PipelineStage::backward(std::uint64_t local, double targetsPerStep, StageWork& work) {
    InFlight& slot = inFlight_[local];
    torch::Tensor gradient;
    if (!role_.last()) gradient = receive(samplesOf(local), role_.next, work);
    const auto m0 = clock_.mark();
    const double sumsBefore = work.sums;
    torch::Tensor inputGradient;
    if (slot.recomputed) {
        inputGradient = backwardRecomputed(slot, gradient, targetsPerStep, work, local == cutMicrobatch_);
    } else if (!slot.layerOutputs.empty()) {
        backwardByLayer(slot, gradient, targetsPerStep, work);
    } else if (role_.last()) {
        (slot.output / targetsPerStep).backward();
    } else {
        slot.output.backward(gradient);
    }
    if (injector_->slows(step_))
        injector_->straggle(step_, fault::Phase::Backward, clock_.seconds(m0, clock_.mark()) - (work.sums - sumsBefore));
    computed_.push_back({m0, clock_.mark(), /*forward=*/false, work.sums - sumsBefore});
    if (!role_.first()) send(slot.recomputed ? inputGradient : slot.input.grad(), role_.previous, Sent::Backward);
    slot = InFlight{};  // the activations of this microbatch are no longer needed
    releaseFinishedSends();
    // A mixture's activations change size with each microbatch's routing: what this microbatch did not reuse of
    // the host's kept blocks goes back now rather than at the step's end (resident 1.20x the plan -> 1.11x, the
    // step 4-7 % slower on the CPU: perf/RESULTS.md). A dense model's sizes repeat: nothing to give back.
    if (model_.config().experts.any()) model::trimCpuCache();
}

void PipelineStage::backwardByLayer(InFlight& slot, const torch::Tensor& gradient, double targetsPerStep,
                                    StageWork& work) {
    const std::size_t n = slot.layerOutputs.size();
    for (std::size_t k = n; k-- > 0;) {
        if (k + 1 < n) {
            slot.layerOutputs[k].backward(slot.layerInputs[k + 1].grad());
        } else if (role_.last()) {
            (slot.layerOutputs[k] / targetsPerStep).backward();
        } else {
            slot.layerOutputs[k].backward(gradient);
        }
        slot.layerInputs.resize(k + 1);  // what is behind the cut is no longer needed
        slot.layerOutputs.resize(k);
        layerFinished(k, work);
    }
}

void PipelineStage::layerFinished(std::size_t k, StageWork& work) {
    const auto t0 = Clock::now();
    (*layerDone_)(model_.firstLayer() + static_cast<std::uint32_t>(k));
    // Not compute: the sums' own time (taken off the backward's by the caller).
    work.sums += since(t0);
}

torch::Tensor PipelineStage::backwardRecomputed(InFlight& slot, torch::Tensor gradient, double targetsPerStep,
                                                StageWork& work, bool final) {
    const std::size_t n = slot.layerInputs.size();
    for (std::size_t k = n; k-- > 0;) {
        // A leaf of its own (the token ids of the embedding take no gradient): its gradient goes below.
        torch::Tensor input = slot.layerInputs[k];
        const bool leaf = input.is_floating_point();
        if (leaf) input = input.detach().requires_grad_(true);
        const bool loss = k + 1 == n && role_.last();
        torch::Tensor output;
        {
            model::AutocastScope autocast(bf16_, device_, model::AutocastScope::Cache::KeepForStep);
            output = model_.layer(static_cast<std::uint32_t>(k)).forward(input);
            if (loss) output = model_.lossSum(output, slot.targets);
        }
        if (loss) {
            (output / targetsPerStep).backward();
        } else {
            output.backward(gradient);
        }
        gradient = leaf ? input.grad() : torch::Tensor();
        slot.layerInputs.resize(k);
        if (final) layerFinished(k, work);
    }
    return gradient;
}

StageWork PipelineStage::run(const data::Batch& batch, double targetsPerStep, fault::FaultInjector& injector,
                             std::uint64_t step, const LayerDone& layerDone) {
    StageWork work;
    if (role_.idle() || pipeline_->microbatches == 0) return work;
    const std::uint64_t m = pipeline_->microbatches;
    const std::uint64_t S = role_.stages, s = role_.stage;
    injector_ = &injector;
    layerDone_ = &layerDone;
    // Both point at the caller's objects: never kept beyond this call, however it ends (a failure throws).
    struct Forget {
        PipelineStage& stage;
        ~Forget() {
            stage.injector_ = nullptr;
            stage.layerDone_ = nullptr;
        }
    } forget{*this};
    // Only the last backward leaves final gradients; the sums wait for nothing else.
    cutMicrobatch_ = layerDone ? m - 1 : ~0ull;
    step_ = step;
    sentThisStep_ = false;
    inFlight_.assign(m, InFlight{});
    lossSum_ = sentForward_ = sentBackward_ = sentPeak_ = torch::Tensor();
    clock_.reset();
    computed_.clear();
    // An attempt abandoned by a failure may have left casts of the weights behind.
    model::AutocastScope::clearCache(bf16_);
    loadTokens(batch);
    // 1F1B: a warm-up of forwards that fills the pipeline below this stage,
    // then one forward and one backward in turn, then the remaining backwards.
    const std::uint64_t warmup = std::min<std::uint64_t>(S - s - 1, m);
    injector.at(step, fault::Phase::Forward);
    for (std::uint64_t i = 0; i < warmup; ++i) forward(i, batch, work);
    for (std::uint64_t j = 0; j < m - warmup; ++j) {
        forward(warmup + j, batch, work);
        if (j == 0) injector.at(step, fault::Phase::Backward);
        backward(j, targetsPerStep, work);
    }
    for (std::uint64_t i = m - warmup; i < m; ++i) {
        if (i == 0) injector.at(step, fault::Phase::Backward);
        backward(i, targetsPerStep, work);
    }
    const auto t0 = Clock::now();
    transport_.waitSends();
    work.waiting += since(t0);
    sending_.clear();
    // The compute times, read once the device has run the step's work (one wait, with a deadline).
    for (const auto& c : computed_) {
        const double seconds = clock_.seconds(c.from, c.to);
        (c.forward ? work.forward : work.backward) += std::max(0.0, seconds - c.notCompute);
    }
    model::AutocastScope::clearCache(bf16_);
    // Every rank of a split last stage has the loss; slot 0 reports it. One read for it and the digests.
    const auto zero = torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat64).device(device_));
    const auto figures = torch::stack({lossSum_.defined() && role_.slot == 0 ? lossSum_ : zero,
                                       sentForward_.defined() ? sentForward_ : zero,
                                       sentBackward_.defined() ? sentBackward_ : zero,
                                       sentPeak_.defined() ? sentPeak_ : zero})
                             .to(torch::kCPU);
    const double* read = figures.data_ptr<double>();
    work.lossSum = read[0];
    work.forwardDigest = read[1];
    work.backwardDigest = read[2];
    work.sentPeak = read[3];
    return work;
}

double PipelineStage::evaluate(const data::Batch& batch) {
    if (role_.idle() || pipeline_->microbatches == 0) return 0.0;
    torch::NoGradGuard noGrad;
    StageWork work;  // its waits are not a step's
    model::AutocastScope::clearCache(bf16_);
    loadTokens(batch);
    const auto L = static_cast<std::int64_t>(batch.sampleLength);
    torch::Tensor lossSum;
    for (std::uint64_t local = 0; local < pipeline_->microbatches; ++local) {
        const std::int64_t b = samplesOf(local);
        torch::Tensor output = role_.first() ? tokensOf(batch, local, b).slice(1, 0, L - 1) : receive(b, role_.previous, work);
        {
            model::AutocastScope autocast(bf16_, device_, model::AutocastScope::Cache::KeepForStep);
            output = model_.forward(output);
            if (role_.last()) output = model_.lossSum(output, tokensOf(batch, local, b).slice(1, 1, L));
        }
        if (role_.last()) {
            const auto loss = output.to(torch::kFloat64);
            lossSum = lossSum.defined() ? lossSum + loss : loss;
        } else {
            send(output, role_.next, Sent::Evaluation);
        }
        releaseFinishedSends();
    }
    transport_.waitSends();
    sending_.clear();
    model::AutocastScope::clearCache(bf16_);
    return lossSum.defined() && role_.slot == 0 ? lossSum.item<double>() : 0.0;
}

}  // namespace kiln::train
