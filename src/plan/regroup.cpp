#include "kiln/plan/regroup.hpp"

#include "kiln/base/error.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace kiln::plan {

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
    return r;
}

}  // namespace kiln::plan
