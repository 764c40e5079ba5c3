// What a step's routers did (mixture-of-experts models): each block's load-balancing and z-loss sums and its
// experts' loads, for the log and diag.h5; and the factor the router losses' gradient is scaled by, the one the
// cross-entropy's is (1 / the step's target tokens). The blocks record into it while autograd records (a
// training forward, or the forward a recomputation runs again in backward), so that an evaluation records
// nothing and a recomputed block is counted once.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace kiln::model {

struct RouterRecord {
    std::uint32_t blocks = 0, experts = 0;
    std::vector<double> balanceSum;  // per block: the load-balancing loss summed over the sequences routed
    std::vector<double> zSum;        // per block: the z-loss summed over the tokens routed
    std::vector<double> load;        // blocks x experts: the tokens each expert received (k per token)
    // Empties it for a model of `blocks` blocks of `experts` experts.
    void reset(std::uint32_t blocks, std::uint32_t experts);
    bool empty() const { return blocks == 0; }
    // The balance loss per sequence and the z-loss per token, averaged over the blocks, of a step of
    // `sequences` sequences of `tokens` tokens in all (1 and 0 for a perfectly balanced, tiny-score router).
    double meanBalance(double sequences) const;
    double meanZ(double tokens) const;
};

// What a model's expert blocks share with whoever trains the model: made by its owner and handed to buildLayer
// (or Gpt), never a process-wide global, so that two models in one process (a test's, an export's) do not mix.
struct RouterLog {
    RouterRecord record;     // reset by the trainer at each attempt of a step; empty: the blocks record nothing
    double lossScale = 1.0;  // the router losses' gradient factor, set before a step's forward
};
using RouterHandle = std::shared_ptr<RouterLog>;

}  // namespace kiln::model
