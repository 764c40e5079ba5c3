// What recovery runs when nodes fail at once, before the run: the start-up
// layout placed as kiln run places it, the regroup that keeps whole pipelines
// (plan/regroup.hpp, the code kiln run and kiln simulate use) and a whole new
// plan for the nodes left beside it. For kiln plan --fail and kiln simulate.
#pragma once

#include "kiln/plan/layout.hpp"
#include "kiln/plan/regroup.hpp"

#include <string>
#include <vector>

namespace kiln::apps {

// The start-up layout of `p` on the job's nodes 0..nodes-1 (spares idle after the pipelines).
plan::Layout startLayout(const plan::RunPlan& p, std::uint32_t nodes);

// `count` nodes of `layout` that fail at once when none are named: one in
// each of the first pipelines (its last node), then the next nodes of each in
// turn, then idle nodes.
std::vector<int> defaultFailedNodes(const plan::Layout& layout, std::uint32_t count);

struct AfterFailures {
    std::uint32_t left = 0;  // nodes left
    plan::Regroup full;      // a whole new plan for them (full.possible false: too few nodes)
    plan::Regroup kept;      // what recovery runs (valid when full.possible)
    // The step after, over the step before, less 1 (kept and full).
    double keptChange() const;
    double fullChange() const;
    double before = 0.0;
};

// After `failed` (node ids of `layout`, p's start-up layout on `nodes` nodes) fail at once.
AfterFailures afterFailures(const plan::RunPlan& p, const plan::Layout& layout, std::uint32_t nodes,
                            const std::vector<int>& failed);

}  // namespace kiln::apps
