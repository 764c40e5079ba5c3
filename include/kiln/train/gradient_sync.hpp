// Gradient sums across heterogeneous pipeline replicas. Every layer is held by
// exactly one stage of every pipeline; its gradient is summed over exactly
// those stages. Where stages are split (tensor parallelism), possibly at
// different widths in different replicas, the sums pair atoms with atoms
// (model/shard_spec.hpp): each atom of the split parameters is summed over
// the one rank of each pipeline that holds it, and the replicated
// parameters over all the stages' ranks, each adding 1/width of its copy. The layout's segments (runs of layers with the same holders)
// each get a communicator, built once per layout from the control
// communicator.
//
// A rank's gradients go in buckets of at most `bucketBytes`, fixed when the
// layout is set: the layers of each segment from the last to the first, so
// every holder of a segment forms the same buckets and starts them in the
// same order. Where sums run beside the compute (NCCL on its own stream), a
// bucket is started as soon as the backward pass has finished its layers (the
// stage reports each layer of its last microbatch: layerReady), so the sums
// of the last layers run while the first ones are still in backward. Where a
// sum blocks the rank (MPI on CPU cores that also compute), the trainer starts
// them all in finish(), after the stage's last send: a stage then never delays
// the one before it, and the last stages sum while the first are still in
// their last backwards (train.grad_sums chooses). finish() starts what is
// left and waits.
//
// A tied head (model.tie_embeddings) is not summed with its layer: the
// embedding's and the head's holders of every pipeline form one group (an
// atom's, in split stages), whose sum is the tied parameter's whole gradient;
// it is written into both copies, and AdamW keeps them equal. A rank holding
// both adds them before the sum. The group is every rank's last bucket.
//
// Why starting in descending layer order cannot deadlock even where a sum
// blocks (MPI): a rank waiting in the sum of segment s waits for the other
// holders of s, which are computing, waiting for a stage downstream (higher
// layers), or in the sum of a segment above s. Every wait points to higher
// layers, so none closes a circle.
#pragma once

#include "kiln/comm/transport.hpp"
#include "kiln/model/gpt.hpp"
#include "kiln/arch/shard_spec.hpp"
#include "kiln/plan/layout.hpp"

#include <mpi.h>

#include <functional>
#include <memory>
#include <vector>

namespace kiln::train {

class GradientSync {
public:
    // Makes the transport of one segment's holders (MPI, or NCCL on GPUs).
    // A transport among `group` (ranks of `control`) whose messages carry `tag`.
    using TransportFactory =
        std::function<std::unique_ptr<comm::Transport>(MPI_Comm control, const std::vector<int>& group, int tag)>;
    // Tags of the segments' groups: kFirstSegmentTag + the segment's index.
    static constexpr int kFirstSegmentTag = 1000;
    // `control`'s ranks are those the layout numbers; `model` holds this
    // rank's layers of the layout. Collective over each segment's holders
    // (with MPI: nothing collective, no communicator is created).
    GradientSync(const plan::Layout& layout, MPI_Comm control, model::Gpt& model, std::size_t bucketBytes,
                 const TransportFactory& transport);

    // Before a step's backward passes. `afterFirstBucket` runs once the first
    // bucket was started (fault injection in the middle of the sums).
    void beginStep(std::function<void()> afterFirstBucket = {});
    // Whether its sums run beside the compute (NCCL's own stream) rather
    // than block the rank until they are done (MPI).
    bool asynchronous() const { return asynchronous_; }
    // Model layer `index` has its final gradient on this rank: start the
    // buckets it completes.
    void layerReady(std::uint32_t index);
    // Starts the buckets not started yet, waits for all and writes the sums
    // into .grad() (undefined gradients count as zeros and are defined
    // afterwards). Returns the bytes this rank all-reduced in the step.
    std::uint64_t finish(model::Gpt& model, torch::Device device);
    // This rank's share of the squared L2 norm of the whole model's summed
    // gradient (each layer counted once, on its holder in pipeline 0): the
    // sum over ranks is the square of the global norm.
    double squaredNorm(model::Gpt& model) const;
    // After a failure: make every pending and future sum return an error.
    void interrupt();

private:
    struct Group {
        std::unique_ptr<comm::Transport> transport;  // nullptr: a single holder, nothing to sum
    };
    // Units `want` of a parameter this rank holds as units `held` (all of it when `whole`).
    struct Piece {
        torch::Tensor param;  // the model's own tensor: a GradientSync lives no longer than the layout it was made for
        arch::ShardSpec spec;
        arch::UnitRange held, want;
        bool whole = true;
        // The tied head held beside the embedding (`param`): its gradient is
        // added before the sum and receives it afterwards.
        torch::Tensor tiedCopy;
        std::vector<torch::Tensor> views(const torch::Tensor& gradient) const;
        std::int64_t values() const;
    };
    struct Bucket {
        comm::Transport* transport = nullptr;  // nullptr: a tied group of one (the adding alone)
        std::vector<Piece> pieces;  // the gradients it sums
        double scale = 1.0;  // applied to this rank's values before the sum
        std::uint32_t lowestLayer = 0;  // ready once this layer is
        torch::Tensor sums;  // while started, where the transport reads: the flat copy being summed
        std::uint64_t bytes = 0;  // summed this step
    };
    void start(Bucket& bucket);
    // Whether parameter k of `layer` is summed by the tied group rather than with its layer.
    static bool tied(const arch::ModelConfig& config, std::uint32_t layer, std::size_t k);
    // The tied groups' buckets, after every other.
    void addTiedSums(const plan::Layout& layout, MPI_Comm control, model::Gpt& model, int rank,
                     const TransportFactory& makeTransport);

    std::vector<Group> groups_;  // the segments this rank holds
    std::vector<std::uint32_t> layers_;  // every layer this rank holds
    std::vector<Bucket> buckets_;  // in the order they start: layers descending
    std::size_t started_ = 0;  // buckets_[0, started_) started this step
    std::vector<std::uint32_t> primaryLayers_;  // layers whose norm this rank counts
    bool countReplicated_ = true;  // their replicated parameters too (slot 0 of a split stage)
    std::function<void()> afterFirstBucket_;
    bool asynchronous_ = false;
};

}  // namespace kiln::train
