#include "failure_whatif.hpp"

#include <algorithm>

namespace kiln::apps {

plan::Layout startLayout(const plan::RunPlan& p, std::uint32_t nodes) {
    std::vector<int> ids;
    std::vector<std::vector<int>> ranks;
    const auto g = static_cast<int>(p.cluster.ranksPerNode);
    for (std::uint32_t n = 0; n < nodes; ++n) {
        ids.push_back(static_cast<int>(n));
        ranks.emplace_back();
        for (int r = 0; r < g; ++r) ranks.back().push_back(static_cast<int>(n) * g + r);
    }
    return plan::placeInstantiation(p.templates, p.instantiation, ids, ranks, p.microBatch, p.globalMicrobatches * p.microBatch);
}

std::vector<int> defaultFailedNodes(const plan::Layout& layout, std::uint32_t count) {
    std::vector<int> failed;
    for (std::size_t depth = 0; failed.size() < count; ++depth) {
        bool any = false;
        for (const auto& pipeline : layout.pipelines)
            if (depth < pipeline.nodeIds.size() && failed.size() < count) {
                failed.push_back(pipeline.nodeIds[pipeline.nodeIds.size() - 1 - depth]);
                any = true;
            }
        if (!any) break;
    }
    for (int id : layout.idleNodes)
        if (failed.size() < count) failed.push_back(id);
    return failed;
}

double AfterFailures::keptChange() const { return kept.instantiation.stepTime / before - 1.0; }
double AfterFailures::fullChange() const { return full.instantiation.stepTime / before - 1.0; }

AfterFailures afterFailures(const plan::RunPlan& p, const plan::Layout& layout, std::uint32_t nodes,
                            const std::vector<int>& failed) {
    AfterFailures a;
    a.before = p.instantiation.stepTime;
    a.left = nodes - std::min(static_cast<std::uint32_t>(failed.size()), nodes);
    a.full = plan::regroup(p, a.left);
    if (!a.full.possible) return a;
    const auto live = [&](int node) { return std::find(failed.begin(), failed.end(), node) == failed.end(); };
    a.kept = plan::regroup(p, a.left, plan::runningOf(layout, live), a.full);
    return a;
}

}  // namespace kiln::apps
