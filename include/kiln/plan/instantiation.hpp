// Instantiation: which pipelines (templates) to run on the nodes at hand, and
// how many microbatches of the global batch each one takes.
//
// Selection: the multiset of templates, at least `minPipelines` of them on at
// most `nodes` nodes, whose step for the whole global batch is shortest. For a
// step time tau, pipeline p can finish cap_p(tau) = the largest m with
// T_p(m) <= tau microbatches; an exact knapsack over (nodes, pipelines) finds
// the largest total capacity, and a binary search over the values tau can
// take (every T_n(m)) finds the smallest at which it covers the global batch.
// Ties go to the choice with fewer idle nodes.
// Distribution: microbatches one at a time to the pipeline whose step would
// end first with one more, which minimises max_p T_p(m_p) exactly because
// every T_p grows with m_p. No solver: integers throughout. Memory bounds
// both: a pipeline never takes more microbatches than its stages can hold in
// flight (the templates fit their reference microbatches; a regroup or a
// rebalance may give a pipeline more), so no layout chosen can run out.
#pragma once

#include "kiln/plan/templates.hpp"

#include <cstdint>
#include <vector>

namespace kiln::plan {

struct PipelineShare {
    std::uint32_t nodes = 0;  // the template used (its nodes, less `without`)
    std::uint64_t microbatches = 0;
    double stepTime = 0.0;  // T_p(m_p)
    std::uint32_t width = 0;  // 0: the best width for `nodes`; else pinned (TemplateSet::forNodes)
    // A template patched after failures (TemplateSet::patched): the template of
    // templateNodes nodes without the node positions `without`. Empty: none.
    std::vector<std::uint32_t> without{};
    std::uint32_t templateNodes = 0;
    bool isPatched() const { return !without.empty(); }
    const PipelineTemplate* templateIn(const TemplateSet& set) const {
        return without.empty() ? set.forNodes(nodes, width) : set.patched(templateNodes, width, without);
    }
};

struct Instantiation {
    std::vector<PipelineShare> pipelines;  // larger templates first
    std::uint32_t nodesUsed = 0, nodesIdle = 0;
    double stepTime = 0.0;  // the slowest pipeline
};

// Throws InputError when not even `minPipelines` of the smallest template fit.
Instantiation instantiate(const TemplateSet& templates, std::uint32_t nodes, std::uint32_t minPipelines,
                          std::uint64_t globalMicrobatches);

// instantiate() around pipelines that stay as they are (a regroup that keeps
// what a failure left whole): `kept` (templates and widths) run on, at least
// `minPipelines` more are chosen for `nodes` other nodes, the shortest step
// over all of them, and the microbatches are distributed over all (`kept`
// first, in their order). The step time is bisected (the kept pipelines can
// be hundreds: no list of every T_n(m)). Throws InputError as instantiate().
Instantiation instantiateAround(const TemplateSet& templates, const std::vector<PipelineShare>& kept,
                                std::uint32_t nodes, std::uint32_t minPipelines, std::uint64_t globalMicrobatches);

// The distribution step alone, for given pipelines. `slowdown` (empty: all
// 1): pipeline p computes each microbatch slowdown[p] times as long as its
// template says (measured during the run); its gradient sums take as long.
void distributeMicrobatches(const TemplateSet& templates, std::uint64_t globalMicrobatches, Instantiation& inst,
                            const std::vector<double>& slowdown = {});

// The most microbatches `t` can take within `memoryPerRank` (their
// activations in flight on every stage); ~0 when any number fits.
std::uint64_t microbatchesThatFit(const PipelineTemplate& t, double memoryPerRank);

// T_p(m) of `share` computing slowdown times as slowly as its template.
double stepTimeOf(const TemplateSet& templates, const PipelineShare& share, std::uint64_t microbatches,
                  double slowdown = 1.0);

}  // namespace kiln::plan
