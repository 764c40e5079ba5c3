// Gradient sums across heterogeneous pipeline replicas. Every layer is held by
// exactly one stage of every pipeline; its gradient is summed over exactly
// those ranks. The layout's segments (runs of layers with the same holders)
// each get a communicator, built once per layout from the control
// communicator; a rank's gradients in a segment go in buckets of at most
// `bucketBytes`, one all-reduce per bucket. The global norm counts every layer
// once (on its holder in pipeline 0).
#pragma once

#include "kiln/comm/transport.hpp"
#include "kiln/model/gpt.hpp"
#include "kiln/plan/layout.hpp"

#include <mpi.h>

#include <functional>
#include <memory>
#include <vector>

namespace kiln::train {

class GradientSync {
public:
    // Makes the transport of one segment's holders (MPI, or NCCL on GPUs).
    using TransportFactory = std::function<std::unique_ptr<comm::Transport>(MPI_Comm)>;
    // Collective over `control`, whose ranks the layout numbers.
    GradientSync(const plan::Layout& layout, MPI_Comm control, std::size_t bucketBytes, const TransportFactory& transport);

    // Sums this rank's layers' gradients with the other holders (undefined
    // gradients count as zeros and are defined afterwards). Returns the bytes
    // this rank all-reduced. `afterFirstBucket` runs once the first bucket is
    // summed (fault injection in the middle of the sums).
    std::uint64_t sum(model::Gpt& model, torch::Device device, const std::function<void()>& afterFirstBucket = {});
    // The L2 norm of the whole model's summed gradient; collective over `control`.
    double globalNorm(model::Gpt& model, MPI_Comm control) const;
    // After a failure: make every pending and future sum return an error.
    void interrupt();

private:
    struct Group {
        std::uint32_t firstLayer = 0, endLayer = 0;
        std::unique_ptr<comm::Transport> transport;  // nullptr: a single holder, nothing to sum
    };
    std::vector<Group> groups_;  // the segments this rank holds
    std::vector<std::uint32_t> primaryLayers_;  // layers whose norm this rank counts
    std::size_t bucketBytes_;
};

}  // namespace kiln::train
