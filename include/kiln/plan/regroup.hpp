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
//
// Given the running layout, a regroup keeps what still works: a pipeline
// that lost no node keeps its template, nodes, ranks and layers. A pipeline
// that lost some is rebuilt with its own template from its survivors and
// idle nodes (spares first) while there are enough of those, so that only
// the failed nodes' layers move; the nodes left over form new pipelines
// around all of those (instantiateAround). The microbatches are split again
// by speed over all. At 2,048 nodes a failure then moves
// about the failed node's layers, not the job's. The whole layout is planned
// again only when the kept one's step is slower than the best for the live
// nodes by more than fault.replan_margin, or tolerates fewer failures. A
// layout the deck pins (plan.pipelines) is run again whenever the live nodes
// (with spares) are as many as at start-up.
#pragma once

#include "kiln/plan/layout.hpp"
#include "kiln/plan/run_plan.hpp"

#include <algorithm>
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
    // A regroup that kept pipelines: for each of the instantiation's first
    // keptFrom.size() pipelines, the running layout's pipeline it comes from:
    // kept as it was (same nodes, ranks and layers), rebuilt with its own
    // template from its survivors and idle nodes, or patched (its survivors
    // taking the lost nodes' layers). Its live nodes keep their positions
    // (pinnedNodes). The rest are new.
    std::vector<std::uint32_t> keptFrom;
    std::uint32_t kept = 0, rebuilt = 0, patched = 0;  // how many of keptFrom were each
    bool replanned = false;  // the kept layout was given up for a whole new plan (said in `replan`)
    std::string replan;      // why, with both step times
};

// The running layout as a regroup sees it: each pipeline's template, and
// whether all its nodes live.
struct Running {
    std::vector<PipelineShare> pipelines;  // the template of each (patched or not; microbatches unused)
    std::vector<bool> whole;               // no node of it failed or retired
    std::vector<std::uint32_t> liveNodes;  // how many of its nodes live
    // The positions, in its whole template, of the nodes it lost now.
    std::vector<std::vector<std::uint32_t>> lostPositions;
};

// Node k of `p` holds this position of its whole template (patched pipelines skip their lost positions).
inline std::vector<std::uint32_t> templatePositions(const PipelinePlacement& p) {
    std::vector<std::uint32_t> positions;
    const std::uint32_t all = p.without.empty() ? p.nodes : p.templateNodes;
    for (std::uint32_t k = 0; k < all; ++k)
        if (!std::binary_search(p.without.begin(), p.without.end(), k)) positions.push_back(k);
    return positions;
}

// For each pipeline the regroup `next` kept from `layout`: the node each of its
// positions stays on (-1: a position a free node fills), for
// CurrentHoldings::keptNodes. A live node keeps the template position it had.
template <typename Live>
std::vector<std::vector<int>> pinnedNodes(const Layout& layout, const Regroup& next, Live live) {
    std::vector<std::vector<int>> pins;
    for (std::size_t i = 0; i < next.keptFrom.size(); ++i) {
        const auto& was = layout.pipelines.at(next.keptFrom[i]);
        const auto& now = next.instantiation.pipelines.at(i);
        const auto had = templatePositions(was);
        std::vector<int> at(std::max(was.without.empty() ? was.nodes : was.templateNodes, now.templateNodes + now.nodes), -1);
        for (std::size_t k = 0; k < had.size(); ++k)
            if (live(was.nodeIds[k])) at[had[k]] = was.nodeIds[k];
        std::vector<int> row;
        const std::uint32_t all = now.without.empty() ? now.nodes : now.templateNodes;
        for (std::uint32_t k = 0; k < all; ++k)
            if (!std::binary_search(now.without.begin(), now.without.end(), k)) row.push_back(at[k]);
        pins.push_back(std::move(row));
    }
    return pins;
}

// `layout`'s pipelines, each whole when `live(nodeId)` holds for all its nodes.
template <typename Live>
Running runningOf(const Layout& layout, Live live) {
    Running r;
    for (const auto& p : layout.pipelines) {
        r.pipelines.push_back(p.share());
        r.pipelines.back().microbatches = 0;
        const auto positions = templatePositions(p);
        std::uint32_t alive = 0;
        std::vector<std::uint32_t> lost;
        for (std::size_t k = 0; k < p.nodeIds.size(); ++k) {
            if (live(p.nodeIds[k])) ++alive;
            else lost.push_back(positions[k]);
        }
        r.whole.push_back(alive == p.nodes);
        r.liveNodes.push_back(alive);
        r.lostPositions.push_back(std::move(lost));
    }
    return r;
}

// The regroup of `liveNodes` surviving nodes under `plan` (planned at start-up),
// from scratch.
Regroup regroup(const RunPlan& plan, std::uint32_t liveNodes);
// The same, keeping `running`'s whole pipelines unless the new plan (`full`:
// regroup(plan, liveNodes), passed in because a simulation asks for it once
// per number of nodes) is better by plan.replanMargin.
Regroup regroup(const RunPlan& plan, std::uint32_t liveNodes, const Running& running, const Regroup& full);

// Node failures that `inst` survives at once: every pipeline holds every layer
// on nodes of its own, so all but one may lose a node.
inline std::uint32_t toleranceOf(const Instantiation& inst) {
    return inst.pipelines.empty() ? 0 : static_cast<std::uint32_t>(inst.pipelines.size() - 1);
}

}  // namespace kiln::plan
