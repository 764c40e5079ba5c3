#include "kiln/train/gradient_sync.hpp"

#include "kiln/base/error.hpp"
#include "kiln/comm/mpi_check.hpp"
#include "kiln/train/layer_state.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace kiln::train {

GradientSync::GradientSync(const plan::Layout& layout, MPI_Comm control, model::Gpt& model, std::size_t bucketBytes,
                           const TransportFactory& makeTransport) {
    bucketBytes = std::max<std::size_t>(bucketBytes, 4);
    int rank = 0;
    KILN_MPI(MPI_Comm_rank(control, &rank));
    const plan::RankRole role = layout.role(rank);
    const std::uint32_t atoms = layout.atoms();
    const HeldShard held{role.slot, role.width};
    const auto& config = model.config();
    countReplicated_ = role.slot == 0;
    // One group of holders per segment where no stage is split. Otherwise
    // one per segment and atom (a rank of each pipeline: the split
    // parameters' units of that atom) and one of every holder (the
    // replicated parameters, each rank adding 1/width of the gradient its
    // stage's ranks all hold alike). Buckets of at most bucketBytes (a larger
    // tensor is a bucket of its own), never across groups; segments and
    // layers from the last, groups in the same order on every rank.
    struct GroupPlan {
        std::vector<int> holders;
        bool split = true, replicated = true;  // which parameters it sums
        std::uint32_t atom = 0;
        double scale = 1.0;
    };
    std::vector<std::vector<Bucket>> perSegment;
    for (std::size_t index = 0; index < layout.segments.size(); ++index) {
        const auto& segment = layout.segments[index];
        if (std::find(segment.holders.begin(), segment.holders.end(), rank) == segment.holders.end()) continue;
        for (std::uint32_t l = segment.firstLayer; l < segment.endLayer; ++l) layers_.push_back(l);
        const std::uint32_t primaryWidth = segment.widths.empty() ? 1 : segment.widths.front();
        if (std::find(segment.holders.begin(), segment.holders.begin() + primaryWidth, rank) !=
            segment.holders.begin() + primaryWidth)
            for (std::uint32_t l = segment.firstLayer; l < segment.endLayer; ++l) primaryLayers_.push_back(l);
        std::vector<GroupPlan> plans;
        if (atoms == 1) {
            plans.push_back({segment.holders, true, true, 0, 1.0});
        } else {
            for (std::uint32_t atom = 0; atom < atoms; ++atom) plans.push_back({segment.holdersOfAtom(atom, atoms), true, false, atom, 1.0});
            if (segment.widths.size() > 1) plans.push_back({segment.holders, false, true, 0, 1.0 / role.width});
        }
        std::vector<Bucket> buckets;
        for (std::size_t g = 0; g < plans.size(); ++g) {
            const auto& plan = plans[g];
            if (plan.holders.size() == 1 || std::find(plan.holders.begin(), plan.holders.end(), rank) == plan.holders.end())
                continue;
            const int tag = kFirstSegmentTag + static_cast<int>(index * (atoms == 1 ? 1 : atoms + 1) + g);
            groups_.push_back(Group{makeTransport(control, plan.holders, tag)});
            asynchronous_ = asynchronous_ || groups_.back().transport->deviceMemory();
            std::size_t size = 0;
            bool fresh = true;
            for (std::uint32_t l = segment.endLayer; l-- > segment.firstLayer;) {
                const auto params = model.layer(l - model.firstLayer()).parameters();
                const auto specs = arch::shardSpecs(config, l);
                for (std::size_t k = 0; k < params.size(); ++k) {
                    if (tied(config, l, k)) continue;  // summed by the tied group
                    const bool replicated = specs[k].replicated() || atoms == 1;
                    if (replicated ? !plan.replicated : !plan.split) continue;
                    const arch::UnitRange mine = arch::unitRange(specs[k].units, held.width, held.slot);
                    const Piece piece{params[k], specs[k], mine,
                                      replicated ? mine : arch::unitRange(specs[k].units, atoms, plan.atom), replicated, {}};
                    const std::size_t bytes = static_cast<std::size_t>(piece.values()) * sizeof(float);
                    if (fresh || (size + bytes > bucketBytes && !buckets.back().pieces.empty())) {
                        buckets.emplace_back();
                        buckets.back().transport = groups_.back().transport.get();
                        buckets.back().scale = plan.scale;
                        size = 0;
                        fresh = false;
                    }
                    buckets.back().pieces.push_back(piece);
                    buckets.back().lowestLayer = l;
                    size += bytes;
                }
            }
        }
        perSegment.push_back(std::move(buckets));
    }
    for (auto it = perSegment.rbegin(); it != perSegment.rend(); ++it)
        for (auto& bucket : *it) buckets_.push_back(std::move(bucket));
    if (config.tieEmbeddings) addTiedSums(layout, control, model, rank, makeTransport);
}

bool GradientSync::tied(const arch::ModelConfig& config, std::uint32_t layer, std::size_t k) {
    return config.tieEmbeddings && ((layer == 0 && k == arch::ModelConfig::kTokenEmbedding) || config.isTiedHead(layer, k));
}

void GradientSync::addTiedSums(const plan::Layout& layout, MPI_Comm control, model::Gpt& model, int rank,
                               const TransportFactory& makeTransport) {
    const auto& config = model.config();
    const std::uint32_t last = config.numLayers() - 1, atoms = layout.atoms();
    const auto segmentOf = [&](std::uint32_t layer) -> const plan::LayerSegment& {
        for (const auto& segment : layout.segments)
            if (layer >= segment.firstLayer && layer < segment.endLayer) return segment;
        throw Error(fmt::format("the layout has no holder of layer {}", layer), ErrorScope::AllRanks);
    };
    const auto& first = segmentOf(0);
    const auto& output = segmentOf(last);
    const auto holds = [&](const plan::LayerSegment& s) {
        return std::find(s.holders.begin(), s.holders.end(), rank) != s.holders.end();
    };
    const bool embedding = holds(first), head = holds(output);
    if (!embedding && !head) return;
    const plan::RankRole role = layout.role(rank);
    const auto spec = arch::shardSpecs(config, 0)[arch::ModelConfig::kTokenEmbedding];
    const auto param = [&](std::uint32_t layer, std::size_t k) { return model.layer(layer - model.firstLayer()).parameters()[k]; };
    // One group an atom of the vocabulary: the embedding's and the head's
    // holders of it in every pipeline, each adding the gradient of its own
    // copy. The sum is the whole gradient of the one tied parameter: in torch
    // terms, the embedding's use plus the head's use, over every replica.
    // After all other buckets on every rank, so that waiting for the first
    // stages' last backward blocks no other sum (the argument of the header
    // still holds: every other wait points to higher layers or to this
    // group, which every rank reaches last).
    const int firstTag =
        kFirstSegmentTag + static_cast<int>(layout.segments.size() * (atoms == 1 ? 1 : atoms + 1));
    for (std::uint32_t atom = 0; atom < atoms; ++atom) {
        std::vector<int> holders = atoms == 1 ? first.holders : first.holdersOfAtom(atom, atoms);
        const auto more = atoms == 1 ? output.holders : output.holdersOfAtom(atom, atoms);
        holders.insert(holders.end(), more.begin(), more.end());
        std::sort(holders.begin(), holders.end());
        holders.erase(std::unique(holders.begin(), holders.end()), holders.end());
        if (std::find(holders.begin(), holders.end(), rank) == holders.end()) continue;
        Bucket bucket;
        if (holders.size() > 1) {
            groups_.push_back(Group{makeTransport(control, holders, firstTag + static_cast<int>(atom))});
            asynchronous_ = asynchronous_ || groups_.back().transport->deviceMemory();
            bucket.transport = groups_.back().transport.get();
        }
        const arch::UnitRange mine = arch::unitRange(spec.units, role.width, role.slot);
        Piece piece{embedding ? param(0, arch::ModelConfig::kTokenEmbedding) : param(last, config.headIndex()), spec, mine,
                    atoms == 1 ? mine : arch::unitRange(spec.units, atoms, atom), atoms == 1, {}};
        if (embedding && head) piece.tiedCopy = param(last, config.headIndex());
        bucket.pieces.push_back(piece);
        bucket.lowestLayer = 0;
        buckets_.push_back(std::move(bucket));
    }
}

std::vector<torch::Tensor> GradientSync::Piece::views(const torch::Tensor& gradient) const {
    if (whole) return {gradient};
    return model::unitViews(gradient, spec, held, want);
}

std::int64_t GradientSync::Piece::values() const {
    if (whole) return param.numel();
    std::int64_t n = 0;
    for (const auto& v : model::unitViews(param, spec, held, want)) n += v.numel();
    return n;
}

void GradientSync::beginStep(std::function<void()> afterFirstBucket) {
    for (auto& bucket : buckets_) {  // what an abandoned attempt left
        bucket.sums = torch::Tensor();
        bucket.bytes = 0;
    }
    started_ = 0;
    afterFirstBucket_ = std::move(afterFirstBucket);
}

void GradientSync::start(Bucket& bucket) {
    std::vector<torch::Tensor> gradients;
    for (auto& piece : bucket.pieces) {
        for (auto p : {piece.param, piece.tiedCopy})
            if (p.defined() && !p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
        // A rank that holds both copies of a tied parameter adds them first.
        if (piece.tiedCopy.defined()) {
            const auto into = piece.views(piece.param.grad()), from = piece.views(piece.tiedCopy.grad());
            for (std::size_t k = 0; k < into.size(); ++k) into[k].add_(from[k]);
        }
        for (auto& view : piece.views(piece.param.grad())) gradients.push_back(view);
    }
    if (!bucket.transport) {  // the only holder: nothing to sum with
        if (started_++ == 0 && afterFirstBucket_) afterFirstBucket_();
        return;
    }
    // Where the transport reads the memory the gradients are in (NCCL and
    // GPU, MPI and CPU), they are summed in place: no copy of the gradients
    // is kept beside them (NCCL groups the bucket's sums in one launch; MPI
    // stages them into one message).
    const bool inPlace = bucket.scale == 1.0 && std::all_of(gradients.begin(), gradients.end(), [&](const torch::Tensor& g) {
        return g.is_cuda() == bucket.transport->deviceMemory() && g.is_contiguous() &&
               g.scalar_type() == torch::kFloat32;
    });
    std::vector<comm::Transport::Floats> buffers;
    if (inPlace) {
        for (auto& g : gradients) buffers.push_back({g.data_ptr<float>(), static_cast<std::size_t>(g.numel())});
    } else {
        // Otherwise one flat copy where the transport reads: host memory for GPU
        // gradients over MPI (ranks sharing a GPU), device memory for the
        // strided views of a split stage's atoms over NCCL; scaled here when
        // the bucket adds a share of replicated gradients.
        std::vector<torch::Tensor> flat;
        for (auto& g : gradients) flat.push_back(g.reshape({-1}));
        const auto where = bucket.transport->deviceMemory() && !gradients.empty() ? gradients.front().device()
                                                                                  : torch::Device(torch::kCPU);
        bucket.sums = torch::cat(flat).to(where, torch::kFloat32).contiguous();
        if (bucket.scale != 1.0) bucket.sums.mul_(bucket.scale);
        buffers.push_back({bucket.sums.data_ptr<float>(), static_cast<std::size_t>(bucket.sums.numel())});
    }
    bucket.transport->allReduceSumAsync(buffers);
    for (const auto& b : buffers) bucket.bytes += b.count * sizeof(float);
    if (started_++ == 0 && afterFirstBucket_) afterFirstBucket_();
}

void GradientSync::layerReady(std::uint32_t index) {
    torch::NoGradGuard noGrad;
    // Layers finish backward from the last: every layer above `index` is final too.
    while (started_ < buckets_.size() && buckets_[started_].lowestLayer >= index) start(buckets_[started_]);
}

std::uint64_t GradientSync::finish(model::Gpt& model, torch::Device device) {
    torch::NoGradGuard noGrad;
    while (started_ < buckets_.size()) start(buckets_[started_]);
    for (auto& group : groups_) group.transport->waitAllReduces();
    std::uint64_t bytes = 0;
    for (auto& bucket : buckets_) {
        bytes += bucket.bytes;
        if (!bucket.sums.defined()) continue;  // summed in place
        const auto sums = bucket.sums.to(device);
        std::int64_t offset = 0;
        for (auto& piece : bucket.pieces)
            for (auto view : piece.views(piece.param.grad())) {
                view.copy_(sums.slice(0, offset, offset + view.numel()).view(view.sizes()));
                offset += view.numel();
            }
        bucket.sums = torch::Tensor();
    }
    for (auto& bucket : buckets_)
        for (auto& piece : bucket.pieces)
            if (piece.tiedCopy.defined()) {
                const auto from = piece.views(piece.param.grad()), to = piece.views(piece.tiedCopy.grad());
                for (std::size_t k = 0; k < from.size(); ++k) to[k].copy_(from[k]);
            }
    afterFirstBucket_ = nullptr;  // it may refer to the caller's step: never kept beyond it
    for (std::uint32_t l : layers_)  // single-holder segments: zeros where no gradient reached
        for (auto& p : model.layer(l - model.firstLayer()).parameters())
            if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
    return bytes;
}

double GradientSync::squaredNorm(model::Gpt& model) const {
    torch::NoGradGuard noGrad;
    // Each tensor's norm in one multi-tensor call where the gradients are (one
    // read of each gradient, a fused kernel on a GPU), squared and summed in
    // float64, then one copy to the host (not one per tensor: each is a device
    // sync). A tensor's norm does not depend on the layout, so neither does
    // the global one beyond float64 rounding.
    // In a split stage each rank counts its shard of the split parameters,
    // and slot 0 alone the replicated ones.
    std::vector<torch::Tensor> gradients;
    for (std::uint32_t l : primaryLayers_) {
        const auto params = model.layer(l - model.firstLayer()).parameters();
        const auto specs = arch::shardSpecs(model.config(), l);
        for (std::size_t k = 0; k < params.size(); ++k)
            if (params[k].grad().defined() && (countReplicated_ || !specs[k].replicated()) &&
                !model.config().isTiedHead(l, k))  // the tied parameter counts once: as the embedding
                gradients.push_back(params[k].grad());
    }
    if (gradients.empty()) return 0.0;
    return torch::stack(at::_foreach_norm(gradients)).to(torch::kFloat64).square().sum().item<double>();
}

void GradientSync::interrupt() {
    for (auto& group : groups_)
        if (group.transport) group.transport->interrupt();
}

}  // namespace kiln::train
