// A mixture of experts in place of a block's dense MLP (arch::Experts).
//
// Routing is computed whole, on every rank of a stage alike: the router's scores of every token, its top-k
// experts and their weights. The experts are spread over the stage's ranks (expert parallelism inside a
// node); each rank runs its own experts on the tokens routed to them and leaves their weighted outputs as a
// partial sum, which the stage's one sum completes, the sum the dense MLP's down projection needs anyway. No
// token moves: the stage's ranks already hold every token (its attention is tensor-parallel), so the
// all-to-all of systems whose ranks hold different tokens would only move more bytes.
//
// The router's losses are computed per sequence (DeepSeek-V3's sequence-wise balance loss) and per token
// (z-loss), so that neither depends on how a step's batch is cut into microbatches or spread over pipelines.
// They reach the gradient through the block's output (the autograd function below), on the first rank of a
// stage alone, since every rank computes them alike and the stage sums the router's gradient.
#include "layer_parts.hpp"

#include "kiln/model/router_record.hpp"

namespace kiln::model::detail {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

// The identity on x forward; backward, it also gives `loss` the gradient `scale` (the step's, read when the
// forward ran: a recomputed forward runs inside the same step), as if the loss had been added to the step's
// (summed, then scaled) cross-entropy.
struct AttachLoss : torch::autograd::Function<AttachLoss> {
    static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& loss, double scale) {
        ctx->saved_data["float64"] = loss.scalar_type() == torch::kFloat64;
        ctx->saved_data["scale"] = scale;
        return x.view_as(x);
    }
    static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
        const auto type = ctx->saved_data["float64"].toBool() ? torch::kFloat64 : torch::kFloat32;
        const double scale = ctx->saved_data["scale"].toDouble();
        return {grads[0], torch::full({}, scale, torch::TensorOptions().dtype(type).device(grads[0].device())),
                torch::Tensor()};
    }
};

// Indices built on the host from counts already there, for the device: from pinned memory without waiting
// (the copy is queued behind the work that uses it), so that a GPU's stream never drains for them.
torch::Tensor indicesOn(const std::vector<std::int64_t>& values, const torch::Device& device) {
    const auto n = static_cast<std::int64_t>(values.size());
    if (device.is_cpu()) return torch::from_blob(const_cast<std::int64_t*>(values.data()), {n}, torch::kInt64).clone();
    auto staged = torch::empty({n}, torch::TensorOptions().dtype(torch::kInt64).pinned_memory(true));
    std::copy(values.begin(), values.end(), staged.data_ptr<std::int64_t>());
    return staged.to(device, /*non_blocking=*/true);
}

torch::Tensor swiglu(const torch::Tensor& x, const torch::Tensor& gate, const torch::Tensor& up, const torch::Tensor& down) {
    return torch::linear(torch::silu(torch::linear(x, gate)) * torch::linear(x, up), down);
}

// An expert's rows rounded up to 4 significant bits (at most 1/8 more): the tokens an expert gets change from
// one microbatch to the next, and its activations would take as many sizes of memory, each kept for reuse by
// the host allocator (cpu_allocations.hpp) or the device's; in a few sizes they are reused instead.
std::int64_t bucketRows(std::int64_t rows) {
    if (rows <= 16) return rows;
    const int shift = 63 - __builtin_clzll(static_cast<unsigned long long>(rows)) - 3;
    const std::int64_t unit = std::int64_t{1} << shift;
    return (rows + unit - 1) / unit * unit;
}

}  // namespace

ExpertMlp::ExpertMlp(const arch::ModelConfig& c, std::uint32_t layer, ShardedParameters& param, SliceHandle slice,
                     RouterHandle router)
    : experts_(c.experts), block_(layer - 1), slice_(std::move(slice)),
      log_(router ? std::move(router) : std::make_shared<RouterLog>()),
      mine_(arch::unitRange(c.experts.count, slice_->width, slice_->rank)) {
    const std::int64_t C = c.dModel, E = experts_.count, He = experts_.width, S = experts_.sharedWidth;
    const double residualStd = residualInitStd(c);
    router_ = param("router_weight", torch::randn({E, C}) * kInitStd);
    gate_ = param("expert_gate_weight", torch::randn({E, He, C}) * kInitStd);
    up_ = param("expert_up_weight", torch::randn({E, He, C}) * kInitStd);
    down_ = param("expert_down_weight", torch::randn({E, C, He}) * residualStd);
    if (S > 0) {
        sharedGate_ = param("shared_gate_weight", torch::randn({S, C}) * kInitStd);
        sharedUp_ = param("shared_up_weight", torch::randn({S, C}) * kInitStd);
        sharedDown_ = param("shared_down_weight", torch::randn({C, S}) * residualStd);
    }
}

torch::Tensor ExpertMlp::localExperts(const torch::Tensor& tokens, const torch::Tensor& tokenOfPair,
                                      const std::vector<std::int64_t>& count) const {
    const auto local = static_cast<std::int64_t>(count.size());
    std::int64_t routed = 0, most = 0;
    for (auto n : count) {
        routed += n;
        most = std::max(most, n);
    }
    // On a GPU, batched when the experts' loads are close (every expert padded to the busiest one's rows, at most
    // half as much again): one kernel per weight for all of them instead of one per expert. Not on the CPU, whose
    // batched product is a loop over the same products (libtorch with OpenBLAS): the padding would only add work.
    const std::int64_t common = bucketRows(most);
    const bool batched = tokens.is_cuda() && local > 1 && 2 * local * common <= 3 * routed;
    std::vector<std::int64_t> rows;
    for (auto n : count) rows.push_back(batched ? common : n == 0 ? 0 : bucketRows(n));
    // Every local expert's tokens in one gather, each expert's run padded to its rows with its first pair's token
    // (those rows' outputs are dropped: no gradient): one scatter in backward. Which pair each row takes depends
    // on the counts alone (on the host); the tokens are looked up on the device.
    std::vector<std::int64_t> pairOfRow, kept;
    for (std::int64_t e = 0, from = 0; e < local; from += count[e], ++e) {
        for (std::int64_t r = 0; r < rows[e]; ++r) {
            if (r < count[e]) kept.push_back(std::int64_t(pairOfRow.size()));
            pairOfRow.push_back(count[e] == 0 ? 0 : from + std::min(r, count[e] - 1));
        }
    }
    const auto inputs = tokens.index_select(0, tokenOfPair.index_select(0, indicesOn(pairOfRow, tokens.device())));
    if (batched) {
        const auto x = inputs.view({local, common, tokens.size(1)});
        const auto h = torch::silu(torch::bmm(x, gate_.transpose(1, 2))) * torch::bmm(x, up_.transpose(1, 2));
        return torch::bmm(h, down_.transpose(1, 2))
            .view({local * common, tokens.size(1)})
            .index_select(0, indicesOn(kept, tokens.device()));
    }
    // One view per expert, taken at once: their gradients are stacked once in backward, where selecting expert e
    // of the (E, ...) weights would give each expert a zero-filled gradient of all of them.
    const auto gates = gate_.unbind(0), ups = up_.unbind(0), downs = down_.unbind(0);
    std::vector<torch::Tensor> outputs;
    for (std::int64_t e = 0, offset = 0; e < local; offset += rows[e], ++e)
        if (count[e] > 0)
            outputs.push_back(swiglu(inputs.narrow(0, offset, rows[e]), gates[e], ups[e], downs[e]).narrow(0, 0, count[e]));
    return torch::cat(outputs);
}

torch::Tensor ExpertMlp::forward(const torch::Tensor& m) {
    const auto B = m.size(0), T = m.size(1), C = m.size(2), N = B * T;
    const std::int64_t E = experts_.count, k = experts_.perToken;
    const auto tokens = m.reshape({N, C});
    // Routing in at least float32 whatever the autocast (float64, used to check gradients, is kept).
    const auto scores = torch::linear(tokens, copyToSlices(router_, *slice_));
    const auto wide = scores.to(c10::promoteTypes(scores.scalar_type(), torch::kFloat32));  // (N, E)
    const auto probabilities = torch::softmax(wide, -1);
    auto [chosenProbabilities, chosen] = probabilities.topk(k, -1);  // (N, k)
    auto weights = experts_.softmax == arch::Experts::Softmax::AfterTopK
                       ? chosenProbabilities / chosenProbabilities.sum(-1, /*keepdim=*/true)
                       : chosenProbabilities;
    weights = weights.to(m.scalar_type());
    const auto flat = chosen.reshape({-1});
    const auto counts = torch::bincount(flat, {}, E);

    // Every rank of a stage routes alike: the first records the routing and carries its losses (computed here,
    // before the counts are read, so that one read from the device brings both).
    auto& log = *log_;
    const bool training = torch::GradMode::is_enabled();
    const bool first = slice_->rank == 0;
    const bool records = training && first && log.record.blocks > block_ && log.record.experts == static_cast<std::uint32_t>(E);
    const bool losses = training && first && (experts_.auxLossCoef != 0.0 || experts_.zLossCoef != 0.0);
    torch::Tensor balance, z;
    if (records || losses) {
        // f_e: the share of a sequence's k T choices that went to expert e (no gradient); P_e: its mean probability.
        const auto sequenceOfPair = torch::arange(B, chosen.options()).repeat_interleave(T * k);
        const auto shares = torch::zeros({B * E}, wide.options())
                                .index_add_(0, sequenceOfPair * E + flat, torch::ones({N * k}, wide.options()))
                                .view({B, E}) / double(k * T);
        const auto meanProbabilities = probabilities.view({B, T, E}).mean(1);
        balance = double(E) * (shares * meanProbabilities).sum(-1);  // (B)
        z = torch::logsumexp(wide, -1).pow(2);                       // (N)
    }
    // The block's one wait for the device: the experts' counts, which size their inputs (and the routing's sums
    // when they are recorded). The tokens routed are found on the device.
    const auto fromDevice = (records ? torch::cat({counts.to(torch::kFloat64),
                                                   torch::stack({balance.sum(), z.sum()}).detach().to(torch::kFloat64)})
                                     : counts.to(torch::kFloat64))
                                .to(torch::kCPU);
    const auto* read = fromDevice.data_ptr<double>();
    std::vector<std::int64_t> count(read, read + E);
    std::vector<std::int64_t> start(static_cast<std::size_t>(E) + 1, 0);
    for (std::int64_t e = 0; e < E; ++e) start[e + 1] = start[e] + count[e];

    // The (token, choice) pairs sorted by expert (stable: by token within an expert); this rank's experts' runs
    // are one contiguous block of them.
    const auto order = std::get<1>(flat.sort(/*stable=*/true, /*dim=*/0, /*descending=*/false));
    const auto pairs = order.slice(0, start[mine_.first], start[mine_.end]);
    auto routed = torch::zeros({N * k, C}, m.options());
    if (pairs.numel() > 0) {
        const std::vector<std::int64_t> load(count.begin() + mine_.first, count.begin() + mine_.end);
        const auto weighted = localExperts(tokens, torch::floor_divide(pairs, k), load) *
                              weights.reshape({-1}).index_select(0, pairs).unsqueeze(1);
        // Each pair has its own row: a copy, not an accumulation, so the result does not depend on the device's
        // order of atomic adds; a token's choices are then summed in the order the router ranked them.
        routed.index_copy_(0, pairs, weighted);
    }
    auto out = routed.view({N, k, C}).sum(1).view({B, T, C});
    // No token chose this rank's experts: a zero through their weights still gives them a (zero) gradient, as the
    // unsplit layer's experts have, so that every rank's gradient sums and update see the same tensors.
    if (pairs.numel() == 0 && gate_.numel() > 0 && training)
        out = out + (gate_.sum() + up_.sum() + down_.sum()).to(out.scalar_type()) * 0.0;
    if (sharedGate_.defined()) out = out + swiglu(m, sharedGate_, sharedUp_, sharedDown_);

    if (!training) return out;
    if (records) {
        auto& record = log.record;
        record.balanceSum[block_] += read[E];
        record.zSum[block_] += read[E + 1];
        for (std::int64_t e = 0; e < E; ++e) record.load[block_ * E + e] += read[e];
    }
    // The other ranks (and the first, when it has no losses to carry) pass a zero through the router's scores:
    // their backward must reach the router's and m's sums over the stage even when none of their experts was
    // chosen, or the ranks' collectives would not pair up.
    if (!losses) return slice_->split() ? AttachLoss::apply(out, wide.sum() * 0.0, log.lossScale) : out;
    // In token units like the summed cross-entropy: alpha T sum over sequences of the balance loss, beta sum over
    // tokens of z.
    return AttachLoss::apply(out, experts_.auxLossCoef * double(T) * balance.sum() + experts_.zLossCoef * z.sum(),
                             log.lossScale);
}

}  // namespace kiln::model::detail
