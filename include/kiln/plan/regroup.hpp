// The layout rule after a failure: what the surviving nodes run.
//
// f counts simultaneous node failures, not failures per run: every regroup
// again runs at least f + 1 pipelines from the start-up templates whenever
// the surviving nodes can form them, so the run survives any f more failures
// at once. Spare nodes (cluster.spare_nodes) take failed nodes' places first:
// while spares are left, the survivors run the start-up instantiation itself.
// Only when the nodes cannot form f + 1 pipelines does the tolerance drop, to
// as many pipelines as they can form, minus one; or when f + 1 pipelines
// could not hold the batch's activations in memory (instantiation.hpp),
// fewer pipelines being the only layout that fits.
#pragma once

#include "kiln/plan/run_plan.hpp"

#include <cstdint>
#include <string>

namespace kiln::plan {

struct Regroup {
    bool possible = false;  // false: fewer surviving nodes than the smallest template needs
    Instantiation instantiation;
    std::uint32_t activeNodes = 0;  // nodes the instantiation is for
    std::uint32_t spares = 0;       // surviving nodes kept in reserve
    std::uint32_t tolerance = 0;    // simultaneous node failures the new layout survives
    std::string degraded;           // why the tolerance is below f; empty when it is not
    std::string why;                // not possible although nodes are left: why (memory)
};

// The regroup of `liveNodes` surviving nodes under `plan` (planned at start-up).
Regroup regroup(const RunPlan& plan, std::uint32_t liveNodes);

// Node failures that `inst` survives at once: every pipeline holds every layer
// on nodes of its own, so all but one may lose a node.
inline std::uint32_t toleranceOf(const Instantiation& inst) {
    return inst.pipelines.empty() ? 0 : static_cast<std::uint32_t>(inst.pipelines.size() - 1);
}

}  // namespace kiln::plan
