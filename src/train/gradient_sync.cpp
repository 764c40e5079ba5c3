#include "kiln/train/gradient_sync.hpp"

#include "kiln/comm/mpi_check.hpp"

#include <algorithm>

namespace kiln::train {

GradientSync::GradientSync(const plan::Layout& layout, MPI_Comm control, model::Gpt& model, std::size_t bucketBytes,
                           const TransportFactory& makeTransport) {
    bucketBytes = std::max<std::size_t>(bucketBytes, 4);
    int rank = 0;
    KILN_MPI(MPI_Comm_rank(control, &rank));
    // Buckets of whole tensors up to bucketBytes (a larger tensor is a bucket
    // of its own), never across segments; segments and layers from the last.
    std::vector<std::vector<Bucket>> perSegment;
    for (std::size_t index = 0; index < layout.segments.size(); ++index) {
        const auto& segment = layout.segments[index];
        const bool holds = std::find(segment.holders.begin(), segment.holders.end(), rank) != segment.holders.end();
        if (!holds) continue;
        for (std::uint32_t l = segment.firstLayer; l < segment.endLayer; ++l) layers_.push_back(l);
        if (segment.holders.front() == rank)
            for (std::uint32_t l = segment.firstLayer; l < segment.endLayer; ++l) primaryLayers_.push_back(l);
        if (segment.holders.size() == 1) continue;
        // The holders in pipeline order; each segment its own tag.
        groups_.push_back(Group{makeTransport(control, segment.holders, kFirstSegmentTag + static_cast<int>(index))});
        asynchronous_ = asynchronous_ || groups_.back().transport->deviceMemory();
        std::vector<Bucket> buckets;
        std::size_t size = 0;
        for (std::uint32_t l = segment.endLayer; l-- > segment.firstLayer;) {
            const auto params = model.layer(l - model.firstLayer()).parameters();
            for (std::size_t k = 0; k < params.size(); ++k) {
                const std::size_t bytes = static_cast<std::size_t>(params[k].numel()) * sizeof(float);
                if (buckets.empty() || (size + bytes > bucketBytes && !buckets.back().params.empty())) {
                    buckets.emplace_back();
                    buckets.back().transport = groups_.back().transport.get();
                    size = 0;
                }
                buckets.back().params.push_back(params[k]);
                buckets.back().lowestLayer = l;
                size += bytes;
            }
        }
        perSegment.push_back(std::move(buckets));
    }
    for (auto it = perSegment.rbegin(); it != perSegment.rend(); ++it)
        for (auto& bucket : *it) buckets_.push_back(std::move(bucket));
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
    for (auto& p : bucket.params) {
        if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
        gradients.push_back(p.grad());
    }
    // Where the transport reads the memory the gradients are in (NCCL and
    // GPU, MPI and CPU), they are summed in place: no copy of the gradients
    // is kept beside them (NCCL groups the bucket's sums in one launch; MPI
    // stages them into one message).
    const bool inPlace = std::all_of(gradients.begin(), gradients.end(), [&](const torch::Tensor& g) {
        return g.is_cuda() == bucket.transport->deviceMemory() && g.is_contiguous() &&
               g.scalar_type() == torch::kFloat32;
    });
    std::vector<comm::Transport::Floats> buffers;
    if (inPlace) {
        for (auto& g : gradients) buffers.push_back({g.data_ptr<float>(), static_cast<std::size_t>(g.numel())});
    } else {
        // Otherwise (GPU gradients over MPI: ranks sharing a GPU): one flat host copy.
        std::vector<torch::Tensor> flat;
        for (auto& g : gradients) flat.push_back(g.reshape({-1}));
        bucket.sums = torch::cat(flat).to(torch::kCPU, torch::kFloat32).contiguous();
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
        for (auto& p : bucket.params) {
            auto& g = p.mutable_grad();
            g.copy_(sums.slice(0, offset, offset + g.numel()).view_as(g));
            offset += g.numel();
        }
        bucket.sums = torch::Tensor();
    }
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
    std::vector<torch::Tensor> gradients;
    for (std::uint32_t l : primaryLayers_)
        for (auto& p : model.layer(l - model.firstLayer()).parameters())
            if (p.grad().defined()) gradients.push_back(p.grad());
    if (gradients.empty()) return 0.0;
    return torch::stack(at::_foreach_norm(gradients)).to(torch::kFloat64).square().sum().item<double>();
}

void GradientSync::interrupt() {
    for (auto& group : groups_)
        if (group.transport) group.transport->interrupt();
}

}  // namespace kiln::train
