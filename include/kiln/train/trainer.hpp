// Training from a deck on the ranks of a world: the loop. The job's nodes run
// the planner's instantiation (or plan.pipelines): pipelines whose stages are
// one rank or several ranks of a node (split layers), each taking its microbatches of the same global batch through a 1F1B
// schedule (pipeline_stage), gradients summed over the holders of each layer
// (gradient_sync); every step is committed by a ULFM agreement; a failure
// regroups the survivors into pipelines from the same templates and moves the
// layers they lack (parallel_state); checkpoints hold every layer once. The
// loss of a step is the mean over all target tokens of the global batch,
// whatever the layout.
#pragma once

#include "kiln/comm/world.hpp"
#include "kiln/config/deck.hpp"

#include <cstdint>
#include <memory>
#include <vector>

namespace kiln::train {

struct TrainSummary {
    // BeyondF: a failure left some layer without a live holder, or too few
    // nodes for one pipeline: checkpointed if it could be, requeue; Requested: the stop
    // signal (a time limit ahead), checkpointed, requeue. The ranks of retired
    // nodes finish with the others (benched, fault/recovery.hpp).
    enum class Stop { Finished, BeyondF, Requested };
    Stop stopped = Stop::Finished;
    std::uint64_t firstStep = 0;  // where this invocation started (after a resume)
    std::uint64_t lastStep = 0;   // steps committed at the end
    double firstLoss = 0.0, lastLoss = 0.0;
    double seconds = 0.0;
    double tokensPerSecond = 0.0;
    std::uint64_t nodeFailures = 0;  // nodes lost since start-up
};

// What a running job tells the processes it admits (spawned, see
// comm/spawn.hpp): its deck's fault.f as the job applies it (a requeue may
// have lowered it), and the run's state: step, loader cursor, layout,
// counters. Filled and read by trainer_admission.cpp.
struct JoinState {
    std::int64_t deckF = 0;
    std::vector<std::int64_t> row;
};

// On a spawned process, after comm::World's spawned-side constructor:
// collective with the job, which sends this while it admits new nodes.
JoinState receiveJoinState(comm::World& world);

class Trainer {
public:
    Trainer(const config::Deck& deck, comm::World& world);
    // A process admitted into a running job: it starts at the job's next step
    // as a spare (or takes layers at once when the job ran with fewer
    // pipelines than fault.f + 1 needs); collective with the job's admission.
    Trainer(const config::Deck& deck, comm::World& world, const JoinState& join);
    ~Trainer();
    // Trains until run.steps (or `untilStep` when smaller); collective.
    TrainSummary run(std::uint64_t untilStep = ~0ull);
    // What the run decided beyond the deck (e.g. the learning-rate horizon kept
    // from the first start), for the resolved deck: comment lines.
    std::string notes() const;
    // Records a decision made outside the trainer (e.g. a lowered fault.f): an
    // event in diag.h5 at the current step and a comment in the resolved deck.
    void record(const std::string& kind, const std::string& detail);

private:
    struct State;
    std::unique_ptr<State> state_;
};

}  // namespace kiln::train
