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

namespace kiln::comm {
class JoinerLink;
}

namespace kiln::train {

struct TrainSummary {
    // BeyondF: a failure left some layer without a live holder, or too few
    // nodes for one pipeline: checkpointed if it could be, requeue; Requested: the stop
    // signal (a time limit ahead), checkpointed, requeue. The ranks of retired
    // nodes finish with the others (benched, fault/recovery.hpp).
    // Numerics: a step's numbers that a rerun repeats, with numerics.on_repeat = stop (exit 3).
    enum class Stop { Finished, BeyondF, Requested, Numerics };
    Stop stopped = Stop::Finished;
    std::uint64_t firstStep = 0;  // where this invocation started (after a resume)
    std::uint64_t lastStep = 0;   // steps committed at the end
    double firstLoss = 0.0, lastLoss = 0.0;
    double seconds = 0.0;
    double tokensPerSecond = 0.0;
    std::uint64_t nodeFailures = 0;  // nodes lost since start-up
};

// What a running job tells the processes it admits (spawned, see
// comm/spawn.hpp): the run's state at the step boundary where they join.
// Sent as one row of integers whose first entry is kJoinStateVersion, so that
// a process of another kiln build is refused by name, not misread.
struct JoinState {
    std::uint32_t startupNodes = 0;  // the plan is made again for these nodes...
    std::uint32_t ranksPerNode = 0;
    std::uint32_t f = 0;             // ...and must come to this fault.f (a requeue may have lowered it)
    std::vector<std::uint64_t> cursor;  // the loader cursor, as data::cursorToRow writes it
    std::uint64_t optimizerSteps = 0;
    std::uint64_t decaySteps = 0;    // the learning-rate horizon kept from the first start
    std::uint32_t tolerance = 0;     // failures the current layout survives
    std::uint32_t spares = 0;
    std::uint64_t nodeFailures = 0;
    std::vector<int> retiredNodes;   // benched nodes stay members: a newcomer leaves them out of layouts too
    std::vector<int> stragglerNodes;
    int diagHolder = 0;              // the rank that writes diag.h5
    bool nccl = false;               // whether the job's stages exchange over NCCL
    std::uint64_t fenceEpoch = 0;
    std::vector<std::int64_t> layout;  // the current layout, as plan::packLayout writes it
};

inline constexpr std::int64_t kJoinStateVersion = 2;

// The row sent to joining processes, and back. unpackJoinState throws Error
// naming both versions when the row is another build's.
std::vector<std::int64_t> packJoinState(const JoinState& join);
JoinState unpackJoinState(const std::vector<std::int64_t>& row);

class Trainer {
public:
    Trainer(const config::Deck& deck, comm::World& world);
    // A process started to join a running job (`world` not joined yet): it
    // reads its deck, data sources and plan first, says it is ready over
    // `link`, and joins at the job's next step boundary as a spare (or takes
    // layers at once when the job ran with fewer pipelines than fault.f + 1
    // needs); collective with the job's admission from there on.
    Trainer(const config::Deck& deck, comm::World& world, comm::JoinerLink& link);
    ~Trainer();
    // Trains until run.steps (or `untilStep` when smaller); collective.
    TrainSummary run(std::uint64_t untilStep = ~0ull);
    // What the run decided beyond the deck (e.g. the learning-rate horizon kept
    // from the first start), for the resolved deck: comment lines.
    std::string notes() const;

private:
    class State;
    std::unique_ptr<State> state_;
};

}  // namespace kiln::train
