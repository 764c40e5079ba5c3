// The regroup after a failure or an admission keeps what still works: the
// pipelines that lost no node keep their nodes, ranks and layers; only the
// failed pipelines' survivors (with idle nodes and spares) form pipelines
// anew; the microbatches are split again over all; a whole new plan replaces
// that only when it is faster by fault.replan_margin or tolerates more.
#include "kiln/plan/instantiation.hpp"
#include "kiln/plan/layout.hpp"
#include "kiln/plan/regroup.hpp"
#include "kiln/plan/run_plan.hpp"

#include <fmt/format.h>
#include "../support/plan_fixtures.hpp"

#include <gtest/gtest.h>

#include <random>
#include <set>

using namespace kiln::plan;

namespace {

// `nodes` nodes of one rank, a model of `layers` layers of random costs, f = 1.
RunPlan randomPlan(std::mt19937& rng, std::uint32_t nodes, std::uint32_t layers, std::uint64_t microbatches,
                   std::uint32_t spares = 0) {
    RunPlan r;
    r.profile.model.blocks = layers - 2;
    r.profile.microBatch = 1;
    std::uniform_real_distribution<double> time(0.5e-3, 5e-3);
    std::uniform_int_distribution<std::uint64_t> bytes(1'000'000, 9'000'000);
    for (std::uint32_t i = 0; i < layers; ++i) {
        const double f = time(rng);
        r.profile.layers.push_back({"block", f, 2 * f, bytes(rng), bytes(rng) / 3, bytes(rng)});
    }
    r.cluster = kiln::test::oneRankNodes(nodes - spares);
    r.spares = spares;
    r.f = 1;
    r.microBatch = 1;
    r.globalMicrobatches = microbatches;
    r.templates = planTemplates(r.profile, r.cluster, r.f, microbatches);
    r.instantiation = instantiate(r.templates, r.cluster.nodes, r.f + 1, microbatches);
    return r;
}

struct Nodes {
    std::vector<int> ids;
    std::vector<std::vector<int>> ranks;
};

// Nodes 0..n-1 but `failed`, one rank each, numbered as after a shrink.
Nodes liveNodes(std::uint32_t n, const std::set<int>& failed) {
    Nodes out;
    for (std::uint32_t k = 0; k < n; ++k) {
        if (failed.count(int(k))) continue;
        out.ids.push_back(int(k));
        out.ranks.push_back({int(out.ranks.size())});
    }
    return out;
}

// What each live node holds in `before` (whose rank r is node r).
CurrentHoldings holdings(const Layout& before, const Nodes& live, std::uint32_t layers) {
    std::vector<std::vector<int>> oldRanks;
    for (int id : live.ids) oldRanks.push_back({id});
    return holdingsOfNodes(before, oldRanks, std::vector<double>(layers, 1000.0));
}

std::uint64_t microbatchesOf(const Instantiation& inst) {
    std::uint64_t m = 0;
    for (const auto& p : inst.pipelines) m += p.microbatches;
    return m;
}

}  // namespace

// Pass criterion: after any one failure, every pipeline that lost no node runs
// on the same nodes with the same stages, and only the nodes that served the
// failed pipeline, or were idle, receive layers.
TEST(KeepingRegroup, WholePipelinesStayAndOnlyTheFailedPipelinesNodesReceive) {
    std::mt19937 rng(51);
    int checked = 0, rebuilt = 0;
    for (int trial = 0; trial < 40; ++trial) {
        const std::uint32_t nodes = 6 + trial % 7, layers = 6 + trial % 5;
        RunPlan plan = randomPlan(rng, nodes, layers, 12 + trial % 9);
        plan.replanMargin = 1e9;  // always keep: what keeping does
        const Nodes all = liveNodes(nodes, {});
        const Layout before = placeInstantiation(plan.templates, plan.instantiation, all.ids, all.ranks, 1,
                                                 plan.globalMicrobatches);
        const int failed = int(rng() % nodes);
        const Nodes live = liveNodes(nodes, {failed});
        const Running running = runningOf(before, [&](int node) { return node != failed; });
        const auto liveCount = static_cast<std::uint32_t>(live.ids.size());
        const Regroup next = regroup(plan, liveCount, running, regroup(plan, liveCount));
        if (!next.possible) continue;
        ++checked;
        EXPECT_FALSE(next.replanned) << next.replan;
        if (next.instantiation.pipelines.size() > next.keptFrom.size() || next.patched > 0) ++rebuilt;
        EXPECT_EQ(microbatchesOf(next.instantiation), plan.globalMicrobatches);
        // Every whole pipeline is kept, in its place among the first ones.
        std::vector<std::uint32_t> whole;
        for (std::uint32_t p = 0; p < running.whole.size(); ++p)
            if (running.whole[p]) whole.push_back(p);
        // Every whole pipeline kept as it was, the failed one rebuilt or patched (or its survivors pooled).
        std::vector<std::uint32_t> keptWhole;
        for (std::size_t k = 0; k < next.keptFrom.size(); ++k)
            if (running.whole[next.keptFrom[k]]) keptWhole.push_back(next.keptFrom[k]);
        ASSERT_EQ(keptWhole, whole);
        EXPECT_EQ(next.kept, whole.size());
        auto keep = holdings(before, live, layers);
        keep.keptNodes = pinnedNodes(before, next, [&](int node) { return node != failed; });
        const Layout after = placeInstantiation(plan.templates, next.instantiation, live.ids, live.ranks, 1,
                                                plan.globalMicrobatches, &keep);
        std::set<int> keptNodes;
        for (std::size_t k = 0; k < next.keptFrom.size(); ++k) {
            if (!running.whole[next.keptFrom[k]]) continue;
            const auto& was = before.pipelines[next.keptFrom[k]];
            const auto& is = after.pipelines[k];
            EXPECT_EQ(is.nodeIds, was.nodeIds);
            EXPECT_EQ(is.cuts, was.cuts);
            keptNodes.insert(is.nodeIds.begin(), is.nodeIds.end());
        }
        // Bytes: none into a kept node.
        for (std::size_t n = 0; n < live.ids.size(); ++n) {
            if (!keptNodes.count(live.ids[n])) continue;
            CurrentHoldings one;
            one.layerBytes = keep.layerBytes;
            one.ofNode = {keep.ofNode[n]};
            EXPECT_EQ(bytesToMove(after, {live.ranks[n]}, one), 0.0) << "node " << live.ids[n] << " was kept";
        }
    }
    EXPECT_GE(checked, 30);
    EXPECT_GT(rebuilt, 0);  // some failed pipelines' survivors formed a pipeline again
}

// Pass criterion: with an idle node (a spare), the failed pipeline gets it in
// the failed node's place: its template stays, and exactly the failed node's
// layers move.
TEST(KeepingRegroup, ASpareRebuildsTheFailedPipelineWithTheFailedNodesLayersAlone) {
    std::mt19937 rng(7);
    RunPlan plan = randomPlan(rng, 9, 8, 16, /*spares=*/1);
    const Nodes all = liveNodes(9, {});
    const Layout before = placeInstantiation(plan.templates, plan.instantiation, all.ids, all.ranks, 1,
                                             plan.globalMicrobatches);
    ASSERT_EQ(before.idleNodes.size(), 1u);
    const int failed = before.pipelines[0].nodeIds.front();
    const Nodes live = liveNodes(9, {failed});
    const Running running = runningOf(before, [&](int node) { return node != failed; });
    const Regroup next = regroup(plan, 8, running, regroup(plan, 8));
    ASSERT_TRUE(next.possible);
    EXPECT_EQ(next.kept, before.pipelines.size() - 1);
    ASSERT_EQ(next.keptFrom.size(), before.pipelines.size());  // the failed one rebuilt with the spare
    EXPECT_EQ(next.rebuilt, 1u);
    auto keep = holdings(before, live, 8);
    keep.keptNodes = pinnedNodes(before, next, [&](int node) { return node != failed; });
    const Layout after = placeInstantiation(plan.templates, next.instantiation, live.ids, live.ranks, 1,
                                            plan.globalMicrobatches, &keep);
    EXPECT_EQ(sharesOf(after).size(), sharesOf(before).size());
    const auto& lost = before.roles[static_cast<std::size_t>(failed)];
    EXPECT_EQ(bytesToMove(after, live.ranks, keep), 1000.0 * (lost.endLayer - lost.firstLayer));
}

// Pass criterion: the kept layout is given up for a new plan exactly when the
// new plan's step is faster by more than fault.replan_margin, and the reason
// names both step times.
TEST(KeepingRegroup, ANewPlanOnlyWhenFasterByTheMargin) {
    std::mt19937 rng(3);
    int replans = 0, kept = 0;
    for (int trial = 0; trial < 60; ++trial) {
        const std::uint32_t nodes = 7 + trial % 6;
        RunPlan plan = randomPlan(rng, nodes, 7 + trial % 4, 10 + trial % 11);
        const Nodes all = liveNodes(nodes, {});
        const Layout before = placeInstantiation(plan.templates, plan.instantiation, all.ids, all.ranks, 1,
                                                 plan.globalMicrobatches);
        const int failed = int(rng() % nodes);
        const Running running = runningOf(before, [&](int node) { return node != failed; });
        const Regroup full = regroup(plan, nodes - 1, Running{}, regroup(plan, nodes - 1));
        if (!full.possible) continue;
        plan.replanMargin = 1e9;
        const Regroup keeping = regroup(plan, nodes - 1, running, full);
        if (!keeping.possible || keeping.replanned) continue;
        plan.replanMargin = 0.0;
        const Regroup strict = regroup(plan, nodes - 1, running, full);
        const bool slower = keeping.instantiation.stepTime > full.instantiation.stepTime;
        EXPECT_EQ(strict.replanned, slower) << keeping.instantiation.stepTime << " " << full.instantiation.stepTime;
        if (strict.replanned) {
            ++replans;
            EXPECT_NE(strict.replan.find(fmt::format("{:.3f} s step", keeping.instantiation.stepTime)), std::string::npos)
                << strict.replan;
            EXPECT_TRUE(strict.keptFrom.empty());
        } else {
            ++kept;
        }
    }
    EXPECT_GT(replans, 0);
    EXPECT_GT(kept, 0);
}

// Pass criterion: around no kept pipeline, the bisected choice is as fast as
// the exact one of instantiate() (to the bisection's precision).
TEST(KeepingRegroup, AroundNothingIsTheExactOptimum) {
    std::mt19937 rng(11);
    for (int trial = 0; trial < 30; ++trial) {
        const std::uint32_t nodes = 4 + trial % 9;
        const RunPlan plan = randomPlan(rng, nodes, 6 + trial % 5, 8 + trial % 17);
        for (std::uint32_t k = 1; k <= 2; ++k) {
            const auto exact = instantiate(plan.templates, nodes, k, plan.globalMicrobatches);
            const auto around = instantiateAround(plan.templates, {}, nodes, k, plan.globalMicrobatches);
            EXPECT_NEAR(around.stepTime, exact.stepTime, 1e-7 * exact.stepTime);
            EXPECT_GE(around.pipelines.size(), k);
            EXPECT_EQ(microbatchesOf(around), plan.globalMicrobatches);
        }
    }
}

// Pass criterion: a patched template covers every layer once, in order, on the
// positions left; each surviving stage keeps the layers it had and only the
// stages next to a lost run gain layers (exactly the lost ones between them).
TEST(KeepingRegroup, APatchedTemplateGivesTheLostLayersToTheNeighboursAlone) {
    std::mt19937 rng(5);
    int checked = 0;
    for (int trial = 0; trial < 40; ++trial) {
        const std::uint32_t nodes = 6 + trial % 5;
        const RunPlan plan = randomPlan(rng, nodes, 8 + trial % 6, 12);
        const std::uint32_t n = plan.templates.maxNodes;
        const PipelineTemplate* base = plan.templates.forNodes(n);
        if (!base || n < 3) continue;
        std::vector<std::uint32_t> without{static_cast<std::uint32_t>(rng() % n)};
        if (trial % 3 == 0) {
            const auto second = static_cast<std::uint32_t>(rng() % n);
            if (second != without[0]) without.push_back(second);
            std::sort(without.begin(), without.end());
        }
        const PipelineTemplate* t = plan.templates.patched(n, 0, without);
        ASSERT_NE(t, nullptr);
        ++checked;
        EXPECT_EQ(t, plan.templates.patched(n, 0, without));  // cached
        ASSERT_EQ(t->stages.size(), base->stages.size() - without.size());
        EXPECT_EQ(t->nodes, n - without.size());
        EXPECT_EQ(t->stages.front().firstLayer, 0u);
        EXPECT_EQ(t->stages.back().endLayer, base->stages.back().endLayer);
        std::size_t s = 0;
        for (std::uint32_t k = 0; k < n; ++k) {
            if (std::binary_search(without.begin(), without.end(), k)) continue;
            const auto& was = base->stages[k];
            const auto& is = t->stages[s];
            if (s > 0) EXPECT_EQ(is.firstLayer, t->stages[s - 1].endLayer);
            EXPECT_LE(is.firstLayer, was.firstLayer);  // it keeps what it had, and may gain
            EXPECT_GE(is.endLayer, was.endLayer);
            // It gains only across a lost position next to it.
            const bool lostBefore = k > 0 && std::binary_search(without.begin(), without.end(), k - 1);
            const bool lostAfter = k + 1 < n && std::binary_search(without.begin(), without.end(), k + 1);
            if (!lostBefore) EXPECT_EQ(is.firstLayer, was.firstLayer);
            if (!lostAfter) EXPECT_EQ(is.endLayer, was.endLayer);
            ++s;
        }
    }
    EXPECT_GE(checked, 30);
}
