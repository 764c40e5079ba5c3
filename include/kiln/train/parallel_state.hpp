// This rank's part of a layout: its layers and their AdamW state, the
// pipeline transport, the gradient-sum groups and the stage executor. Made
// for a layout at start-up; remade for another layout after a failure, when
// the layers this rank now needs come from the surviving ranks that held them
// (parameters, both moments: nothing is read from a checkpoint).
#pragma once

#include "kiln/comm/world.hpp"
#include "kiln/fault/fault_injector.hpp"
#include "kiln/model/gpt.hpp"
#include "kiln/plan/layout.hpp"
#include "kiln/plan/migration.hpp"
#include "kiln/train/adamw.hpp"
#include "kiln/train/gradient_sync.hpp"
#include "kiln/train/pipeline_stage.hpp"

#include <functional>
#include <memory>

namespace kiln::train {

// One step's parallel work on this rank.
struct StepWork {
    StageWork stage;
    double squaredNorm = 0.0;  // this rank's share of the summed gradient's squared norm
    double sumsSeconds = 0.0;  // waiting for the gradient sums (inside backward and after it)
};

struct MigrationReport {
    std::uint64_t bytesReceived = 0, bytesSent = 0;
    std::uint32_t layersReceived = 0;
    double migrateSeconds = 0.0;  // transfers, until every survivor agreed
};

class ParallelState {
public:
    // Collective over world.control(); builds this rank's layers fresh (layer-seeded).
    ParallelState(const arch::ModelConfig& model, const TrainConfig& config, torch::Device device, comm::World& world,
                  plan::Layout layout);
    // On a process admitted into a running job: the job's `layout` (this
    // rank's layers built fresh, usually none: a spare), the job's transport
    // choice and AdamW step count. Not collective and not connected: the
    // admission connects it together with the job's ranks.
    ParallelState(const arch::ModelConfig& model, const TrainConfig& config, torch::Device device, plan::Layout layout,
                  int rank, bool nccl, std::uint64_t optimizerSteps);
    ~ParallelState();

    // Collective over the new world.control(): switches to `layout`, taking the
    // layers this rank keeps and receiving the others from a surviving holder.
    // `oldMembers`: the start-up ranks of the control communicator the current
    // layout was made for. The switch is committed by an agreement: if any rank fails
    // meanwhile, every survivor keeps the current layout and state and this
    // throws ProcFailedError (recover again, with the larger failed set).
    // `at` is called in the migration's phases (fault injection: Migrate,
    // Received, Migrated). Afterwards the state is the new layout's but
    // unconnected: call connect(). Throws plan::LayersLostError (every rank
    // alike) when some layer has no surviving holder.
    using PhaseHook = std::function<void(fault::Phase)>;
    MigrationReport reconfigure(comm::World& world, plan::Layout layout, const std::vector<int>& oldMembers,
                                const PhaseHook& at = {});
    // The same layout on world.control() after ranks without a role left it:
    // `oldMembers` are the start-up ranks of the communicator it was made for.
    void renumber(const comm::World& world, const std::vector<int>& oldMembers);
    // The same pipelines, stages and ranks with another split of the global
    // batch (`inst`: one share per pipeline, in order; a rebalance). Local:
    // every rank must make the same call at the same step boundary.
    void redistribute(const plan::Instantiation& inst);
    // Builds the pipeline transport, the gradient-sum communicators and the
    // stage for the current layout (collective over world.control()).
    void connect(comm::World& world);

    // The step's forwards and backwards of this rank's stage and its
    // gradient sums with the other replicas, started during or after the
    // last backward (train.grad_sums): afterwards every layer's .grad() holds
    // the summed gradient. `injector` fires in the phases it names (backward,
    // send, allreduce, sums ...).
    StepWork runStep(const data::Batch& batch, double targetsPerStep, fault::FaultInjector& injector,
                     std::uint64_t step);

    // The held-out loss of `batch` on this rank's stage (forwards only; see
    // PipelineStage::evaluate): collective over the rank's pipeline.
    double evaluate(const data::Batch& batch) { return stage_->evaluate(batch); }

    model::Gpt& model() { return *model_; }
    // What this rank's expert blocks recorded of their routing, and the scale of their losses' gradient.
    model::RouterLog& routerLog() { return *routerLog_; }
    AdamW& optimizer() { return *optimizer_; }
    const plan::Layout& layout() const { return layout_; }
    const plan::RankRole& role() const { return role_; }
    // Every stage that holds each layer (the ranks of one stage each, in slot
    // order; pipeline 0's first): the candidates to write it to a checkpoint.
    std::vector<std::vector<std::vector<int>>> holders() const;
    // Collective: every rank of world.control() holds the same layout (and
    // split of the batch), or every rank throws DisagreementError. Made by
    // connect() and reconfigure() before they act on it; call it after a
    // redistribute().
    void requireSameLayout(const comm::World& world);
    // The current layout's fingerprint digest (folded into every step's check).
    std::uint64_t layoutDigest() const { return layoutDigest_; }
    // Whether pipelines and gradient sums run over NCCL (the same on every rank).
    bool nccl() const { return nccl_; }
    // After a failure: every pending and future transfer returns an error.
    void interrupt();

private:
    // The model and optimizer of a new layout on this rank: the layers it
    // keeps shared with the current ones (with their moments), the others built
    // to be overwritten by the migration.
    struct Target {
        model::SliceHandle slice;
        std::unique_ptr<model::Gpt> model;
        std::unique_ptr<AdamW> optimizer;
    };
    Target buildTarget(const comm::World& world, const plan::Layout& layout, const std::vector<int>& oldMembers) const;
    // This rank's part of `plan`: packs what it sends, unpacks what it receives into `target`.
    MigrationReport moveLayers(const comm::World& world, const plan::MigrationPlan& plan, const plan::Layout& layout,
                               Target& target, const PhaseHook& at);

    // The tensor transport among `group` (ranks of `comm`; empty: all) with
    // messages tagged `tag`: NCCL in device memory for a GPU run (when built
    // with NCCL and every rank has a GPU of its own; a communicator of the
    // group), MPI in host memory otherwise (on `comm` itself: nothing created).
    std::unique_ptr<comm::Transport> makeTransport(MPI_Comm comm, std::vector<int> group = {}, int tag = 7) const;

    arch::ModelConfig modelConfig_;
    TrainConfig config_;
    torch::Device device_;
    plan::Layout layout_;
    plan::RankRole role_;
    std::unique_ptr<model::Gpt> model_;
    std::unique_ptr<AdamW> optimizer_;
    // Destroyed in reverse order: the transport (which completes pending
    // sends) before the stage (which holds their buffers).
    std::unique_ptr<PipelineStage> stage_;
    std::unique_ptr<GradientSync> gradients_;
    std::unique_ptr<comm::Transport> transport_;
    // The sums inside a split stage (its ranks only); `slice_` is this rank's
    // place in the stage, shared with its layers.
    std::unique_ptr<comm::Transport> tensor_;
    model::SliceHandle slice_;
    // Shared with every expert block this rank builds, kept or rebuilt by a regroup.
    model::RouterHandle routerLog_ = std::make_shared<model::RouterLog>();
    bool nccl_ = false;  // decided at start-up, the same on every rank
    std::uint64_t layoutDigest_ = 0;
};

}  // namespace kiln::train
