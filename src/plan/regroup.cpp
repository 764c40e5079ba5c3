#include "kiln/plan/regroup.hpp"

#include "kiln/base/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

namespace kiln::plan {

namespace {

void describeTolerance(const RunPlan& plan, Regroup& r) {
    const std::uint32_t smallest = plan.templates.minNodes;
    r.tolerance = toleranceOf(r.instantiation);
    if (r.tolerance < plan.f && r.activeNodes / smallest >= plan.f + 1)
        r.degraded = fmt::format("fault.f + 1 = {} pipelines on {} surviving nodes cannot hold the batch's activations "
                                 "in plan.memory_gb; {} can",
                                 plan.f + 1, r.activeNodes, r.instantiation.pipelines.size());
    else if (r.tolerance < plan.f)
        r.degraded = fmt::format("{} surviving node{} can form at most {} pipeline{} of at least {} node{} each, not "
                                 "fault.f + 1 = {}",
                                 r.activeNodes, r.activeNodes == 1 ? "" : "s", r.activeNodes / smallest,
                                 r.activeNodes / smallest == 1 ? "" : "s", smallest, smallest == 1 ? "" : "s", plan.f + 1);
}

// Failed pipeline `p` of `running` without a node to take the failed ones' places: its survivors run
// on, patched, their neighbours taking the lost nodes' layers; nothing when that does not fit.
std::optional<PipelineShare> patchedPipeline(const RunPlan& plan, const Running& running, std::size_t p,
                                             std::uint32_t templateNodes) {
    PipelineShare patched = running.pipelines[p];
    patched.without.insert(patched.without.end(), running.lostPositions[p].begin(), running.lostPositions[p].end());
    std::sort(patched.without.begin(), patched.without.end());
    patched.templateNodes = templateNodes;
    patched.nodes = templateNodes - static_cast<std::uint32_t>(patched.without.size());
    const PipelineTemplate* t = patched.nodes > 0 ? patched.templateIn(plan.templates) : nullptr;
    if (!t || microbatchesThatFit(*t, plan.templates.memoryPerRank) == 0) return std::nullopt;
    return patched;
}

}  // namespace

Regroup regroup(const RunPlan& plan, std::uint32_t liveNodes, const Running& running, const Regroup& full) {
    Regroup kept;
    kept.activeNodes = std::min(liveNodes, plan.cluster.nodes);
    kept.spares = liveNodes - kept.activeNodes;
    // Nodes of the running pipelines that still live; the other live nodes are idle (or spares).
    std::uint32_t inPipelines = 0, wholeCount = 0;
    for (std::size_t p = 0; p < running.pipelines.size(); ++p) {
        inPipelines += running.liveNodes[p];
        wholeCount += running.whole[p] ? 1 : 0;
    }
    if (wholeCount == 0) return full;  // nothing to keep: the new plan is the regroup
    // A layout the deck pins (plan.pipelines) runs again whenever the nodes allow: the user's choice.
    if (plan.pinned && full.possible && full.activeNodes == plan.cluster.nodes) return full;
    // Failed pipelines take idle nodes in their failed nodes' places, in order, while there are enough.
    std::uint32_t idle = liveNodes > inPipelines ? liveNodes - inPipelines : 0;
    std::vector<PipelineShare> fixed;
    std::uint32_t fixedNodes = 0;
    for (std::size_t p = 0; p < running.pipelines.size(); ++p) {
        const auto& share = running.pipelines[p];
        // Its whole template, and the positions of it that no live node holds.
        PipelineShare whole = share;
        whole.nodes = share.isPatched() ? share.templateNodes : share.nodes;
        whole.without.clear();
        whole.templateNodes = 0;
        const std::uint32_t missing = whole.nodes - running.liveNodes[p];
        if (running.whole[p] && !share.isPatched()) {
            ++kept.kept;
            fixed.push_back(share);
        } else if (missing <= idle) {
            // Idle nodes (spares first) in the lost nodes' places: its own template again.
            idle -= missing;
            ++kept.rebuilt;
            fixed.push_back(whole);
        } else if (running.whole[p]) {
            ++kept.kept;  // patched, and no node yet to take its layers back
            fixed.push_back(share);
        } else if (auto patched = patchedPipeline(plan, running, p, whole.nodes)) {
            ++kept.patched;
            fixed.push_back(std::move(*patched));
        } else {
            continue;  // its survivors join the pool
        }
        kept.keptFrom.push_back(static_cast<std::uint32_t>(p));
        fixedNodes += fixed.back().nodes;
    }
    const auto pipelines = static_cast<std::uint32_t>(fixed.size());
    if (fixedNodes <= kept.activeNodes && plan.templates.minNodes > 0) {
        const std::uint32_t pool = kept.activeNodes - fixedNodes;
        const std::uint32_t more = pipelines >= plan.f + 1 ? 0 : plan.f + 1 - pipelines;
        try {
            kept.instantiation = instantiateAround(plan.templates, fixed, pool, more, plan.globalMicrobatches);
            kept.possible = true;
        } catch (const InputError& e) {
            kept.why = e.what();
        }
    }
    if (!kept.possible) {
        if (!full.possible) return full;
        Regroup r = full;
        r.replanned = true;
        r.replan = fmt::format("the pipelines that lost no node cannot stay as they are ({}); planned again",
                               kept.why.empty() ? "more of them than nodes the layout may use" : kept.why);
        return r;
    }
    describeTolerance(plan, kept);
    if (full.possible) {
        const double keptStep = kept.instantiation.stepTime, newStep = full.instantiation.stepTime;
        const bool safer = std::min(full.tolerance, plan.f) > std::min(kept.tolerance, plan.f);
        if (safer || keptStep > newStep * (1.0 + plan.replanMargin)) {
            Regroup r = full;
            r.replanned = true;
            r.replan = safer
                           ? fmt::format("keeping the whole pipelines tolerates {} simultaneous failure{}, a new plan {}; "
                                         "planned again",
                                         kept.tolerance, kept.tolerance == 1 ? "" : "s", full.tolerance)
                           : fmt::format("keeping the whole pipelines gives a {:.3f} s step, a new plan {:.3f} s (more "
                                         "than fault.replan_margin = {:g} faster); planned again",
                                         keptStep, newStep, plan.replanMargin);
            return r;
        }
    }
    return kept;
}

Regroup regroup(const RunPlan& plan, std::uint32_t liveNodes) {
    Regroup r;
    const std::uint32_t smallest = plan.templates.minNodes;
    // Spares stand in first: the pipelines keep the start-up size while they last.
    r.activeNodes = std::min(liveNodes, plan.cluster.nodes);
    r.spares = liveNodes - r.activeNodes;
    if (smallest == 0 || r.activeNodes < smallest) return r;
    r.possible = true;
    if (r.activeNodes == plan.cluster.nodes) {
        r.instantiation = plan.instantiation;  // the start-up layout (pinned or the planner's), on other nodes
    } else {
        const std::uint32_t most = r.activeNodes / smallest;
        // As many pipelines as f asks for and the nodes allow, fewer (longer,
        // with less on each stage) when memory cannot hold the batch on those.
        for (std::uint32_t pipelines = std::min(plan.f + 1, most);; --pipelines) {
            try {
                r.instantiation = instantiate(plan.templates, r.activeNodes, pipelines, plan.globalMicrobatches);
                break;
            } catch (const InputError& e) {
                if (pipelines == 1) {
                    r.possible = false;
                    r.why = e.what();
                    return r;
                }
            }
        }
    }
    describeTolerance(plan, r);
    return r;
}

}  // namespace kiln::plan
