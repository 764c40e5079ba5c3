#include "kiln/train/gradient_sync.hpp"

#include "kiln/comm/mpi_check.hpp"

#include <algorithm>
#include <cmath>

namespace kiln::train {

GradientSync::GradientSync(const plan::Layout& layout, MPI_Comm control, std::size_t bucketBytes,
                           const TransportFactory& makeTransport)
    : bucketBytes_(std::max<std::size_t>(bucketBytes, 4)) {
    int rank = 0;
    KILN_MPI(MPI_Comm_rank(control, &rank));
    for (const auto& segment : layout.segments) {
        const auto it = std::find(segment.holders.begin(), segment.holders.end(), rank);
        const bool holds = it != segment.holders.end();
        // Every rank takes part in every split (collective), holders with their pipeline as key.
        MPI_Comm comm = MPI_COMM_NULL;
        KILN_MPI(MPI_Comm_split(control, holds ? 0 : MPI_UNDEFINED,
                                holds ? static_cast<int>(it - segment.holders.begin()) : 0, &comm));
        if (!holds) continue;
        Group group{segment.firstLayer, segment.endLayer, nullptr};
        if (segment.holders.size() > 1) group.transport = makeTransport(comm);
        MPI_Comm_free(&comm);
        groups_.push_back(std::move(group));
        if (segment.holders.front() == rank)
            for (std::uint32_t l = segment.firstLayer; l < segment.endLayer; ++l) primaryLayers_.push_back(l);
    }
}

std::uint64_t GradientSync::sum(model::Gpt& model, torch::Device device, const std::function<void()>& afterFirstBucket) {
    torch::NoGradGuard noGrad;
    std::uint64_t bytes = 0;
    for (auto& group : groups_) {
        std::vector<torch::Tensor> params;
        for (std::uint32_t l = group.firstLayer; l < group.endLayer; ++l)
            for (auto& p : model.layer(l - model.firstLayer()).parameters()) {
                if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
                params.push_back(p);
            }
        if (!group.transport) continue;
        // Buckets of whole tensors up to bucketBytes_ (a larger tensor is a bucket of its own).
        std::size_t first = 0;
        while (first < params.size()) {
            std::size_t end = first, size = 0;
            while (end < params.size() && (end == first || size + params[end].nbytes() <= bucketBytes_))
                size += params[end++].nbytes();
            std::vector<torch::Tensor> flat;
            for (std::size_t k = first; k < end; ++k) flat.push_back(params[k].grad().reshape({-1}));
            auto bucket = torch::cat(flat);
            if (!group.transport->deviceMemory()) bucket = bucket.to(torch::kCPU);
            bucket = bucket.to(torch::kFloat32).contiguous();
            group.transport->allReduceSum(bucket.data_ptr<float>(), static_cast<std::size_t>(bucket.numel()));
            if (bytes == 0 && afterFirstBucket) afterFirstBucket();
            bytes += static_cast<std::uint64_t>(bucket.nbytes());
            bucket = bucket.to(device);
            std::int64_t offset = 0;
            for (std::size_t k = first; k < end; ++k) {
                auto& g = params[k].mutable_grad();
                g.copy_(bucket.slice(0, offset, offset + g.numel()).view_as(g));
                offset += g.numel();
            }
            first = end;
        }
    }
    return bytes;
}

double GradientSync::globalNorm(model::Gpt& model, MPI_Comm control) const {
    torch::NoGradGuard noGrad;
    // Each tensor's norm in one multi-tensor call where the gradients are (one
    // read of each gradient, a fused kernel on a GPU), squared and summed in
    // float64, then one copy to the host for the sum over ranks (not one per
    // tensor: each is a device sync). A tensor's norm does not depend on the
    // layout, so neither does the global one beyond float64 rounding.
    std::vector<torch::Tensor> gradients;
    for (std::uint32_t l : primaryLayers_)
        for (auto& p : model.layer(l - model.firstLayer()).parameters())
            if (p.grad().defined()) gradients.push_back(p.grad());
    double sum = 0.0;
    if (!gradients.empty())
        sum = torch::stack(at::_foreach_norm(gradients)).to(torch::kFloat64).square().sum().item<double>();
    KILN_MPI(MPI_Allreduce(MPI_IN_PLACE, &sum, 1, MPI_DOUBLE, MPI_SUM, control));
    return std::sqrt(sum);
}

void GradientSync::interrupt() {
    for (auto& group : groups_)
        if (group.transport) group.transport->interrupt();
}

}  // namespace kiln::train
