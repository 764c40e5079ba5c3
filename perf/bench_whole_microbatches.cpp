// The planner against the arithmetic of whole microbatches (issue 51, item 4). For a deck and node counts:
// the fastest step at which any split of N nodes into pipelines of the deck's templates, each taking whole
// microbatches, finishes a global batch (an unbounded knapsack over the templates at each candidate step
// time, by bisection), beside the planner's instantiation for the same N. The bound leaves out what the
// planner must also respect (f + 1 pipelines, spares), so the planner can only be as fast or slower; on the
// 70B deck of run A it is as fast, which says that what a missing node costs is the arithmetic's, not the
// planner's. One JSON line per count; exits non-zero when the planner is slower than the bound by more than
// 0.1 %, or faster than it (a wrong bound).
//
//   build/perf/bench_whole_microbatches DECK N1 [N2 ...] [--set key=value ...]
#include "kiln/arch/model_config.hpp"
#include "kiln/base/error.hpp"
#include "kiln/config/deck.hpp"
#include "kiln/plan/run_plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

using namespace kiln;

namespace {

// The most microbatches one pipeline of template `t` finishes within `step` seconds.
std::uint64_t finishedWithin(const plan::PipelineTemplate& t, double step, std::uint64_t most) {
    std::uint64_t lo = 0, hi = most;
    while (lo < hi) {
        const std::uint64_t mid = (lo + hi + 1) / 2;
        if (t.stepTime(mid) <= step) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

// The most microbatches `nodes` nodes finish within `step`, over every split into pipelines of the templates.
std::uint64_t capacity(const plan::TemplateSet& set, std::uint32_t nodes, double step, std::uint64_t global) {
    std::vector<std::pair<std::uint32_t, std::uint64_t>> each;  // template nodes, microbatches it finishes
    for (std::uint32_t n = set.minNodes; n <= set.maxNodes; ++n)
        if (const auto* t = set.forNodes(n)) each.emplace_back(n, finishedWithin(*t, step, global));
    std::vector<std::uint64_t> best(nodes + 1, 0);
    for (std::uint32_t k = 1; k <= nodes; ++k) {
        best[k] = best[k - 1];
        for (const auto& [n, m] : each)
            if (n <= k) best[k] = std::max(best[k], best[k - n] + m);
    }
    return best[nodes];
}

// The least step time at which `nodes` nodes finish `global` microbatches: among the templates' own step times.
double boundStep(const plan::TemplateSet& set, std::uint32_t nodes, std::uint64_t global) {
    std::vector<double> candidates;
    for (std::uint32_t n = set.minNodes; n <= set.maxNodes; ++n)
        if (const auto* t = set.forNodes(n))
            for (std::uint64_t m = 1; m <= global; ++m) candidates.push_back(t->stepTime(m));
    std::sort(candidates.begin(), candidates.end());
    std::size_t lo = 0, hi = candidates.size();  // the first candidate that suffices, in [lo, hi)
    while (lo < hi) {
        const std::size_t mid = (lo + hi) / 2;
        if (capacity(set, nodes, candidates[mid], global) >= global) hi = mid;
        else lo = mid + 1;
    }
    if (lo == candidates.size()) throw InputError(fmt::format("{} nodes cannot finish {} microbatches", nodes, global));
    return candidates[lo];
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: bench_whole_microbatches DECK N1 [N2 ...] [--set key=value ...]\n");
        return 2;
    }
    try {
        std::vector<std::uint32_t> counts;
        std::vector<std::string> overrides;
        for (int i = 2; i < argc; ++i) {
            if (std::string(argv[i]) == "--set" && i + 1 < argc) overrides.push_back(argv[++i]);
            else counts.push_back(static_cast<std::uint32_t>(std::stoul(argv[i])));
        }
        int bad = 0;
        double firstRate = 0.0;
        for (std::uint32_t nodes : counts) {
            auto all = overrides;
            all.push_back(fmt::format("plan.nodes={}", nodes));
            const auto deck = config::Deck::fromFile(argv[1], all);
            const auto model = arch::modelConfigFromDeck(deck, 0);
            const auto p = plan::planRun(deck, model, plan::clusterFromDeck(deck, nodes));
            const double bound = boundStep(p.templates, p.cluster.nodes, p.globalMicrobatches);
            const double planner = p.instantiation.stepTime;
            const double rate = double(p.globalMicrobatches) / planner;
            if (firstRate == 0.0) firstRate = rate;
            const bool ok = planner <= bound * 1.001 && planner >= bound * (1 - 1e-9);
            bad += ok ? 0 : 1;
            std::printf("%s\n", fmt::format("{{\"bench\": \"whole-microbatches\", \"nodes\": {}, \"microbatches\": {}, "
                                            "\"planner_step_s\": {:.4f}, \"bound_step_s\": {:.4f}, \"throughput_vs_first\": {:.4f}, "
                                            "\"nodes_vs_first\": {:.4f}, \"ok\": {}}}",
                                            nodes, p.globalMicrobatches, planner, bound, rate / firstRate,
                                            double(nodes) / counts.front(), ok ? "true" : "false")
                                    .c_str());
        }
        return bad == 0 ? 0 : 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_whole_microbatches: %s\n", e.what());
        return 1;
    }
}
