// Training from a deck on the ranks of a world. Every rank holds a replica of
// the whole model for now (pipelines of one stage); each takes its slice of
// the global batch, splits it into microbatches, and the replicas' gradients
// are summed layer by layer. The loss of a step is the mean over all target
// tokens of the global batch, however it is sliced and split.
#pragma once

#include "kiln/comm/world.hpp"
#include "kiln/config/deck.hpp"

#include <memory>

namespace kiln::train {

struct TrainSummary {
    enum class Stop { Finished, NodeRetired, BeyondF };
    Stop stopped = Stop::Finished;  // NodeRetired: this rank left with its node; BeyondF: checkpointed, requeue
    std::uint64_t firstStep = 0;  // where this invocation started (after a resume)
    std::uint64_t lastStep = 0;   // steps committed at the end
    double firstLoss = 0.0, lastLoss = 0.0;
    double seconds = 0.0;
    double tokensPerSecond = 0.0;
};

class Trainer {
public:
    Trainer(const config::Deck& deck, comm::World& world);
    ~Trainer();
    // Trains until run.steps (or `untilStep` when smaller); collective.
    TrainSummary run(std::uint64_t untilStep = ~0ull);

private:
    struct State;
    std::unique_ptr<State> state_;
};

}  // namespace kiln::train
