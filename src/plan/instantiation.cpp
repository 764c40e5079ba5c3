#include "kiln/plan/instantiation.hpp"

#include "kiln/base/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <queue>

namespace kiln::plan {

std::uint64_t microbatchesThatFit(const PipelineTemplate& t, double memoryPerRank) {
    // In flight on stage s: min(S - s, m); beyond S microbatches nothing grows.
    const auto S = static_cast<std::uint64_t>(t.stages.size());
    const auto fits = [&](std::uint64_t m) {
        for (std::uint64_t s = 0; s < S; ++s)
            if (t.stages[s].memoryWith(std::min(S - s, m)) > memoryPerRank) return false;
        return true;
    };
    if (memoryPerRank <= 0.0 || fits(S)) return ~0ull;
    std::uint64_t m = 0;
    while (m + 1 < S && fits(m + 1)) ++m;
    return m;
}

double stepTimeOf(const TemplateSet& templates, const PipelineShare& share, std::uint64_t microbatches,
                  double slowdown) {
    const PipelineTemplate& t = *share.templateIn(templates);
    return microbatches == 0 ? 0.0 : slowdown * t.pipelineTime(microbatches) + t.perStep();
}

void distributeMicrobatches(const TemplateSet& templates, std::uint64_t globalMicrobatches, Instantiation& inst,
                            const std::vector<double>& slowdown) {
    const auto factor = [&](std::size_t p) { return slowdown.empty() ? 1.0 : slowdown[p]; };
    using Entry = std::pair<double, std::size_t>;  // end time with one more microbatch, pipeline
    std::priority_queue<Entry, std::vector<Entry>, std::greater<>> next;
    std::vector<std::uint64_t> cap;
    for (std::size_t p = 0; p < inst.pipelines.size(); ++p) {
        inst.pipelines[p].microbatches = 0;
        cap.push_back(microbatchesThatFit(*inst.pipelines[p].templateIn(templates), templates.memoryPerRank));
        if (cap.back() > 0) next.push({stepTimeOf(templates, inst.pipelines[p], 1, factor(p)), p});
    }
    for (std::uint64_t k = 0; k < globalMicrobatches; ++k) {
        if (next.empty())
            throw InputError(fmt::format("the pipelines cannot hold {} microbatches in plan.memory_gb: they fit {} "
                                         "(activations in flight); more nodes, more memory, or a smaller micro-batch",
                                         globalMicrobatches, k));
        const auto [time, p] = next.top();
        next.pop();
        auto& share = inst.pipelines[p];
        ++share.microbatches;
        if (share.microbatches < cap[p]) next.push({stepTimeOf(templates, share, share.microbatches + 1, factor(p)), p});
    }
    inst.stepTime = 0.0;
    for (std::size_t p = 0; p < inst.pipelines.size(); ++p) {
        auto& share = inst.pipelines[p];
        share.stepTime = stepTimeOf(templates, share, share.microbatches, factor(p));
        inst.stepTime = std::max(inst.stepTime, share.stepTime);
    }
}

namespace {

// Microbatches an n-node pipeline finishes within `tau` seconds (tau is one
// of the T_n(m) values, so compare with those, not with a rounded quotient).
std::uint64_t capacity(const PipelineTemplate& t, double tau, std::uint64_t fit) {
    const double room = tau - t.latency() - t.perStep();
    if (room < 0.0) return 0;
    auto m = static_cast<std::uint64_t>(std::floor(room / t.bottleneck())) + 1;
    while (m > 0 && t.stepTime(m) > tau) --m;
    while (t.stepTime(m + 1) <= tau) ++m;
    return std::min(m, fit);
}

struct Choice {
    std::vector<std::uint32_t> pipelines;  // template sizes
    std::uint64_t capacity = 0;
};

// The multiset of at least K pipelines on at most `nodes` nodes that finishes
// the most microbatches within `tau` (exact knapsack over nodes and pipelines
// counted up to K); on ties, the one that leaves fewer nodes idle.
Choice mostCapacity(const TemplateSet& templates, std::uint32_t nodes, std::uint32_t K, double tau) {
    constexpr std::int64_t none = -1;
    std::vector<std::vector<std::int64_t>> best(nodes + 1, std::vector<std::int64_t>(K + 1, none));
    std::vector<std::vector<std::pair<std::uint32_t, std::uint32_t>>> from(nodes + 1,
        std::vector<std::pair<std::uint32_t, std::uint32_t>>(K + 1, {0, 0}));
    for (std::uint32_t c = 0; c <= nodes; ++c) best[c][0] = 0;
    std::vector<std::int64_t> capacityOf(templates.maxNodes + 1, -1);
    for (std::uint32_t n = templates.minNodes; n <= templates.maxNodes; ++n)
        if (const auto* t = templates.forNodes(n))
            capacityOf[n] = static_cast<std::int64_t>(capacity(*t, tau, microbatchesThatFit(*t, templates.memoryPerRank)));
    for (std::uint32_t c = 1; c <= nodes; ++c) {
        for (std::uint32_t k = 1; k <= K; ++k) {
            for (std::uint32_t n = templates.minNodes; n <= std::min(templates.maxNodes, c); ++n) {
                const auto cap = capacityOf[n];
                if (cap < 0) continue;
                const auto relax = [&](std::uint32_t prev) {
                    if (best[c - n][prev] == none) return;
                    if (best[c - n][prev] + cap > best[c][k]) {
                        best[c][k] = best[c - n][prev] + cap;
                        from[c][k] = {n, prev};
                    }
                };
                relax(k - 1);
                if (k == K) relax(K);
            }
            // An idle node only when strictly better: ties use more nodes.
            if (best[c - 1][k] > best[c][k]) {
                best[c][k] = best[c - 1][k];
                from[c][k] = {0, k};
            }
        }
    }
    Choice choice;
    if (best[nodes][K] == none) return choice;
    choice.capacity = static_cast<std::uint64_t>(best[nodes][K]);
    for (std::uint32_t c = nodes, k = K; c > 0;) {
        const auto [n, prev] = from[c][k];
        if (n == 0) {
            --c;
            continue;
        }
        choice.pipelines.push_back(n);
        c -= n;
        k = prev;
    }
    return choice;
}

// The best choice of at least K pipelines on `nodes` nodes within `tau`; K = 0
// allows none (a regroup's pool of nodes too small, or not worth a pipeline).
Choice poolChoice(const TemplateSet& templates, std::uint32_t nodes, std::uint32_t K, double tau) {
    if (K > 0) return mostCapacity(templates, nodes, K, tau);
    if (nodes < templates.minNodes) return {};
    Choice some = mostCapacity(templates, nodes, 1, tau);
    return some.capacity > 0 ? some : Choice{};
}

}  // namespace

Instantiation instantiateAround(const TemplateSet& templates, const std::vector<PipelineShare>& kept,
                                std::uint32_t nodes, std::uint32_t minPipelines, std::uint64_t globalMicrobatches) {
    if (std::uint64_t(minPipelines) * templates.minNodes > nodes)
        throw InputError(fmt::format("{} nodes cannot hold {} more pipelines: each needs at least {} nodes", nodes,
                                     minPipelines, templates.minNodes));
    // The kept pipelines by template (hundreds of pipelines, a few templates), each with how many
    // pipelines use it and the microbatches it fits.
    std::map<const PipelineTemplate*, std::pair<std::uint64_t, std::uint64_t>> keptTemplates;
    for (const auto& share : kept) {
        const PipelineTemplate* t = share.templateIn(templates);
        if (!t) throw Error(fmt::format("no template for {} nodes of width {}", share.nodes, share.width), ErrorScope::AllRanks);
        auto [it, added] = keptTemplates.try_emplace(t, 0, 0);
        if (added) it->second.second = microbatchesThatFit(*t, templates.memoryPerRank);
        ++it->second.first;
    }
    const auto capacityAt = [&](double tau, Choice* pool) {
        std::uint64_t total = 0;
        for (const auto& [t, use] : keptTemplates) total += use.first * capacity(*t, tau, use.second);
        Choice choice = poolChoice(templates, nodes, minPipelines, tau);
        total += choice.capacity;
        if (pool) *pool = std::move(choice);
        return total;
    };
    // The longest step any of them could need: one pipeline taking every microbatch.
    double hi = 0.0;
    for (const auto& [t, use] : keptTemplates) hi = std::max(hi, t->stepTime(globalMicrobatches));
    for (std::uint32_t n = templates.minNodes; n <= std::min(templates.maxNodes, nodes); ++n)
        if (const auto* t = templates.forNodes(n)) hi = std::max(hi, t->stepTime(globalMicrobatches));
    Choice pool;
    const std::uint64_t most = capacityAt(hi, &pool);
    if (most < globalMicrobatches)
        throw InputError(fmt::format("{} kept pipeline{} and {} node{} cannot hold the {} microbatches of a global batch "
                                     "in plan.memory_gb (at most {} fit)",
                                     kept.size(), kept.size() == 1 ? "" : "s", nodes, nodes == 1 ? "" : "s",
                                     globalMicrobatches, most));
    // Capacity only grows with tau: bisect to the smallest tau that holds the batch (to far below a
    // microbatch's time; every rank computes the same doubles, so every rank chooses alike).
    double lo = 0.0;
    for (int i = 0; i < 200 && hi - lo > 1e-9 * hi; ++i) {
        const double mid = 0.5 * (lo + hi);
        if (capacityAt(mid, nullptr) >= globalMicrobatches) hi = mid;
        else lo = mid;
    }
    capacityAt(hi, &pool);
    Instantiation inst;
    inst.pipelines = kept;
    for (auto& share : inst.pipelines) inst.nodesUsed += share.nodes;
    std::vector<std::uint32_t> added = pool.pipelines;
    std::sort(added.begin(), added.end(), std::greater<>());
    for (auto n : added) {
        inst.pipelines.push_back({n, 0, 0.0, 0});
        inst.nodesUsed += n;
    }
    inst.nodesIdle = nodes - (inst.nodesUsed - std::accumulate(kept.begin(), kept.end(), 0u,
                                                               [](std::uint32_t a, const PipelineShare& s) { return a + s.nodes; }));
    distributeMicrobatches(templates, globalMicrobatches, inst);
    return inst;
}

Instantiation instantiate(const TemplateSet& templates, std::uint32_t nodes, std::uint32_t minPipelines,
                          std::uint64_t globalMicrobatches) {
    const std::uint32_t K = std::max<std::uint32_t>(minPipelines, 1);
    if (std::uint64_t(K) * templates.minNodes > nodes)
        throw InputError(fmt::format("{} nodes cannot hold {} pipelines: each needs at least {} nodes", nodes, K,
                                     templates.minNodes));
    // The shortest step time for which some choice finishes every microbatch
    // is one of the values T_n(m): binary search over them, sorted.
    std::vector<double> candidates;
    for (std::uint32_t n = templates.minNodes; n <= std::min(templates.maxNodes, nodes); ++n)
        if (const auto* t = templates.forNodes(n))
            for (std::uint64_t m = 1; m <= globalMicrobatches; ++m) candidates.push_back(t->stepTime(m));
    std::sort(candidates.begin(), candidates.end());
    candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
    // The largest suffices unless memory bounds the pipelines (said below).
    std::size_t lo = 0, hi = candidates.size() - 1;
    while (lo < hi) {
        const std::size_t mid = (lo + hi) / 2;
        if (mostCapacity(templates, nodes, K, candidates[mid]).capacity >= globalMicrobatches) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    const Choice choice = mostCapacity(templates, nodes, K, candidates[hi]);
    if (choice.capacity < globalMicrobatches)
        throw InputError(fmt::format("{} pipeline{} on {} nodes cannot hold the {} microbatches of a global batch in "
                                     "plan.memory_gb (activations in flight; at most {} fit): more nodes, more memory "
                                     "per rank, or a smaller micro-batch",
                                     K, K == 1 ? "" : "s", nodes, globalMicrobatches, choice.capacity));
    Instantiation inst;
    for (auto n : choice.pipelines) {
        inst.pipelines.push_back({n, 0, 0.0, 0});
        inst.nodesUsed += n;
    }
    inst.nodesIdle = nodes - inst.nodesUsed;
    std::sort(inst.pipelines.begin(), inst.pipelines.end(), [](const auto& a, const auto& b) { return a.nodes > b.nodes; });
    distributeMicrobatches(templates, globalMicrobatches, inst);
    return inst;
}

}  // namespace kiln::plan
