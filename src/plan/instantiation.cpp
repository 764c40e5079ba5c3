#include "kiln/plan/instantiation.hpp"

#include "kiln/base/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <queue>

namespace kiln::plan {

void distributeMicrobatches(const TemplateSet& templates, std::uint64_t globalMicrobatches, Instantiation& inst) {
    using Entry = std::pair<double, std::size_t>;  // end time with one more microbatch, pipeline
    std::priority_queue<Entry, std::vector<Entry>, std::greater<>> next;
    for (std::size_t p = 0; p < inst.pipelines.size(); ++p) {
        inst.pipelines[p].microbatches = 0;
        next.push({templates.forNodes(inst.pipelines[p].nodes)->stepTime(1), p});
    }
    for (std::uint64_t k = 0; k < globalMicrobatches; ++k) {
        const auto [time, p] = next.top();
        next.pop();
        auto& share = inst.pipelines[p];
        ++share.microbatches;
        next.push({templates.forNodes(share.nodes)->stepTime(share.microbatches + 1), p});
    }
    inst.stepTime = 0.0;
    for (auto& share : inst.pipelines) {
        share.stepTime = templates.forNodes(share.nodes)->stepTime(share.microbatches);
        inst.stepTime = std::max(inst.stepTime, share.stepTime);
    }
}

namespace {

// Microbatches an n-node pipeline finishes within `tau` seconds.
std::uint64_t capacity(const PipelineTemplate& t, double tau) {
    const double room = tau - t.latency() - t.sync();
    if (room < 0.0) return 0;
    return static_cast<std::uint64_t>(std::floor(room / t.bottleneck() + 1e-9)) + 1;
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
    for (std::uint32_t c = 1; c <= nodes; ++c) {
        for (std::uint32_t k = 1; k <= K; ++k) {
            for (std::uint32_t n = templates.minNodes; n <= std::min(templates.maxNodes, c); ++n) {
                const auto cap = static_cast<std::int64_t>(capacity(*templates.forNodes(n), tau));
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

}  // namespace

Instantiation instantiate(const TemplateSet& templates, std::uint32_t nodes, std::uint32_t minPipelines,
                          std::uint64_t globalMicrobatches) {
    const std::uint32_t K = std::max<std::uint32_t>(minPipelines, 1);
    if (std::uint64_t(K) * templates.minNodes > nodes)
        throw InputError(fmt::format("{} nodes cannot hold {} pipelines: each needs at least {} nodes", nodes, K,
                                     templates.minNodes));
    // The shortest step time tau for which some choice finishes every
    // microbatch: bisection, from K smallest pipelines sharing the batch.
    const auto& smallest = *templates.forNodes(templates.minNodes);
    double lo = 0.0, hi = smallest.stepTime((globalMicrobatches + K - 1) / K);
    for (int i = 0; i < 100 && hi - lo > 1e-12 * hi; ++i) {
        const double mid = 0.5 * (lo + hi);
        (mostCapacity(templates, nodes, K, mid).capacity >= globalMicrobatches ? hi : lo) = mid;
    }
    const Choice choice = mostCapacity(templates, nodes, K, hi);
    Instantiation inst;
    for (auto n : choice.pipelines) {
        inst.pipelines.push_back({n, 0, 0.0});
        inst.nodesUsed += n;
    }
    inst.nodesIdle = nodes - inst.nodesUsed;
    std::sort(inst.pipelines.begin(), inst.pipelines.end(), [](const auto& a, const auto& b) { return a.nodes > b.nodes; });
    distributeMicrobatches(templates, globalMicrobatches, inst);
    return inst;
}

}  // namespace kiln::plan
