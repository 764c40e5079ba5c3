#include "kiln/train/pipeline_stage.hpp"

#include "kiln/train/autocast_scope.hpp"

#include <algorithm>
#include <chrono>

namespace kiln::train {

using Clock = std::chrono::steady_clock;

namespace {

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Samples [offset, offset + b) of this rank's slice as int64 ids (b, seq_len + 1), owned.
torch::Tensor tokensOf(const data::Batch& batch, std::uint64_t offset, std::int64_t b, torch::Device device) {
    const auto L = static_cast<std::int64_t>(batch.sampleLength);
    // Token ids are below 2^31, so the uint32 buffer reads as int32; the int64 conversion copies it.
    auto* first = const_cast<std::uint32_t*>(batch.tokens.data() + offset * batch.sampleLength);
    return torch::from_blob(first, {b, L}, torch::kInt32).to(device, torch::kInt64);
}

}  // namespace

PipelineStage::PipelineStage(model::Gpt& model, const plan::Layout& layout, int rank, comm::Transport& transport,
                             torch::Device device, bool bf16)
    : model_(model), layout_(layout), role_(layout.roles.at(static_cast<std::size_t>(rank))), transport_(transport),
      device_(device), bf16_(bf16) {
    if (!role_.idle()) pipeline_ = &layout.pipelines[static_cast<std::size_t>(role_.pipeline)];
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

void PipelineStage::send(torch::Tensor tensor, int peer) {
    if (!sentThisStep_ && injector_) injector_->at(step_, fault::Phase::Send);
    sentThisStep_ = true;
    // Always fp32 and contiguous where the transport reads: the receiver expects exactly that.
    auto buffer = tensor.detach().to(transport_.deviceMemory() ? device_ : torch::Device(torch::kCPU), torch::kFloat32)
                      .contiguous();
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
        const std::uint64_t offset = layout_.microbatchBegin(pipeline_->firstMicrobatch + local) - batch.first;
        input = tokensOf(batch, offset, b, device_).slice(1, 0, static_cast<std::int64_t>(batch.sampleLength) - 1);
    } else {
        input = receive(b, role_.previous, work).requires_grad_(true);
    }
    const auto t0 = Clock::now();
    torch::Tensor output;
    {
        AutocastScope autocast(bf16_, device_);
        output = model_.forward(input);
        if (role_.last()) {
            const std::uint64_t offset = layout_.microbatchBegin(pipeline_->firstMicrobatch + local) - batch.first;
            const auto targets = tokensOf(batch, offset, b, device_).slice(1, 1, static_cast<std::int64_t>(batch.sampleLength));
            output = model::crossEntropySum(output, targets);
        }
    }
    work.forward += since(t0);
    if (role_.last()) {
        work.lossSum += output.item<double>();
    } else {
        send(output, role_.next);
    }
    slot.input = input;
    slot.output = output;
    releaseFinishedSends();
}

void PipelineStage::backward(std::uint64_t local, double targetsPerStep, StageWork& work) {
    InFlight& slot = inFlight_[local];
    torch::Tensor gradient;
    if (!role_.last()) gradient = receive(samplesOf(local), role_.next, work);
    const auto t0 = Clock::now();
    if (role_.last()) {
        (slot.output / targetsPerStep).backward();
    } else {
        slot.output.backward(gradient);
    }
    work.backward += since(t0);
    if (!role_.first()) send(slot.input.grad(), role_.previous);
    slot = InFlight{};  // the activations of this microbatch are no longer needed
    releaseFinishedSends();
}

StageWork PipelineStage::run(const data::Batch& batch, double targetsPerStep, fault::FaultInjector& injector,
                             std::uint64_t step) {
    StageWork work;
    if (role_.idle() || pipeline_->microbatches == 0) return work;
    const std::uint64_t m = pipeline_->microbatches;
    const std::uint64_t S = role_.stages, s = role_.stage;
    injector_ = &injector;
    step_ = step;
    sentThisStep_ = false;
    inFlight_.assign(m, InFlight{});
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
    return work;
}

}  // namespace kiln::train
