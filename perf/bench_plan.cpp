// Planner benchmark (issue 6): a 96-block GPT-3-like model (d_model 12288,
// 96 heads, seq_len 2048, vocabulary 50257, micro-batch 1, synthetic profile
// at 300 TFLOP/s per GPU), 8 GPUs of 80 GB per node, global batch 1536
// sequences, f = 2, on 64, 256 and 1024 nodes; single thread.
//
// Metrics: seconds to plan the whole template set; milliseconds for one
// instantiation; predicted throughput (samples/s = 1536 / predicted step
// time) of kiln's instantiation against, in the same run, (a) the best
// instantiation that uses one template size only (as many pipelines of it as
// fit) and (b) pipelines of the smallest template only (the most replicas).
// Validates: every instantiation covers the global batch with >= f+1
// pipelines; exits non-zero if kiln's is slower than a baseline or the
// 256-node template set takes more than 10 s.
#include "bench_cases.hpp"
#include "kiln/plan/instantiation.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cstdio>

using namespace kiln::plan;
using Clock = std::chrono::steady_clock;

namespace {

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Pipelines of one template size n only.
Instantiation homogeneous(const TemplateSet& set, std::uint32_t n, std::uint32_t nodes, std::uint64_t microbatches) {
    Instantiation inst;
    for (std::uint32_t p = 0; p < nodes / n; ++p) inst.pipelines.push_back({n, 0, 0.0});
    inst.nodesUsed = nodes / n * n;
    inst.nodesIdle = nodes - inst.nodesUsed;
    distributeMicrobatches(set, microbatches, inst);
    return inst;
}

}  // namespace

int main() {
    const auto gpt3 = kiln::bench::gpt3Config();
    const std::uint64_t microbatches = 1536, f = 2;
    const auto profile = syntheticProfile(gpt3, 1, 300.0);
    int status = 0;
    for (std::uint32_t nodes : {64u, 256u, 1024u}) {
        const ClusterSpec cluster = kiln::bench::nodesOf8(nodes);
        const auto t0 = Clock::now();
        const auto set = planTemplates(profile, cluster, f, microbatches);
        const double templateSeconds = since(t0);
        const auto t1 = Clock::now();
        const auto inst = instantiate(set, nodes, f + 1, microbatches);
        const double instantiationMs = 1e3 * since(t1);
        double bestHomogeneous = 1e300;
        std::uint32_t bestN = 0;
        for (std::uint32_t n = set.minNodes; n <= set.maxNodes; ++n) {
            if (nodes / n < f + 1 || !set.forNodes(n)) continue;
            const auto h = homogeneous(set, n, nodes, microbatches);
            if (h.stepTime < bestHomogeneous) {
                bestHomogeneous = h.stepTime;
                bestN = n;
            }
        }
        const auto smallest = homogeneous(set, set.minNodes, nodes, microbatches);
        std::uint64_t covered = 0;
        for (const auto& p : inst.pipelines) covered += p.microbatches;
        const bool valid = covered == microbatches && inst.pipelines.size() >= f + 1;
        fmt::print("{{\"bench\":\"plan\",\"nodes\":{},\"ranks_per_node\":8,\"layers\":{},\"templates\":{},\"min_nodes\":{},"
                   "\"max_nodes\":{},\"template_seconds\":{:.3f},\"instantiation_ms\":{:.2f},\"pipelines\":{},"
                   "\"idle_nodes\":{},\"kiln_samples_per_s\":{:.2f},\"best_one_size_samples_per_s\":{:.2f},"
                   "\"best_one_size_nodes\":{},\"smallest_template_samples_per_s\":{:.2f},\"kiln_over_best_one_size\":{:.4f},"
                   "\"valid\":{}}}\n",
                   nodes, gpt3.numLayers(), set.templates.size(), set.minNodes, set.maxNodes, templateSeconds,
                   instantiationMs, inst.pipelines.size(), inst.nodesIdle, microbatches / inst.stepTime,
                   microbatches / bestHomogeneous, bestN, microbatches / smallest.stepTime,
                   bestHomogeneous / inst.stepTime, valid);
        if (!valid || inst.stepTime > bestHomogeneous * (1 + 1e-9) || inst.stepTime > smallest.stepTime * (1 + 1e-9)) {
            std::fprintf(stderr, "bench_plan: %u nodes: kiln's instantiation is invalid or slower than a baseline\n", nodes);
            status = 1;
        }
        if (nodes == 256 && templateSeconds > 10.0) {
            std::fprintf(stderr, "bench_plan: 256-node template set took %.1f s (goal: under 10 s)\n", templateSeconds);
            status = 1;
        }
    }
    return status;
}
