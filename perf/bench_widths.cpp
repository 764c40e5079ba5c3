// Stage widths (issue 20): kiln's planner choosing a width per template
// (tensor parallelism inside a node) against, in the same run and under the
// same cost model, (a) one-rank stages only (kiln before: pipeline
// parallelism alone) and (b) whole-node stages only (the layout of
// Oobleck's templates, 8-GPU stages; this is kiln's planner held to that
// width, not Oobleck's code). 8 GPUs of 80 GB per node, 300 TFLOP/s
// synthetic profiles, 300 GB/s inside a node, 50 GB/s between nodes.
//
//  gpt3   96 blocks, d_model 12288, 96 heads, seq 2048, vocabulary 50257,
//         micro-batch 1, global batch 1536, f = 2, on 64 nodes: which planner
//         plans at all, and the predicted step of its instantiation.
//  l24    24 layers (22 blocks, d_model 2048, 16 heads, seq 2048), micro-batch
//         4, global batch 256, for n = 1, 2, 3 nodes: the template's step time.
//  scale  the gpt3 template set and an instantiation for 4,096 nodes.
// One JSON line per case. Exits non-zero when kiln's choice is slower than a
// fixed width that plans, fails to plan where one does, or 4,096 nodes take
// longer than 1 s.
#include "bench_cases.hpp"
#include "kiln/plan/instantiation.hpp"

#include "kiln/base/error.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <optional>

using namespace kiln::plan;
using Clock = std::chrono::steady_clock;

namespace {

using kiln::bench::nodesOf8;

std::optional<TemplateSet> plan(const ModelProfile& profile, const ClusterSpec& c, std::uint32_t f, std::uint64_t global) {
    try {
        return planTemplates(profile, c, f, global);
    } catch (const kiln::InputError&) {
        return std::nullopt;
    }
}

const char* name(std::uint32_t width) { return width == 0 ? "kiln" : width == 1 ? "one_rank_stages" : "whole_node_stages"; }

}  // namespace

int main() {
    int status = 0;
    const auto gpt3 = kiln::bench::gpt3Config();
    const auto gpt3Profile = syntheticProfile(gpt3, 1, 300.0);
    double kilnStep = 0.0;
    for (std::uint32_t width : {0u, 1u, 8u}) {
        const auto set = plan(gpt3Profile, nodesOf8(64, width), 2, 1536);
        double step = 0.0;
        std::string widths;
        if (set) {
            const auto inst = instantiate(*set, 64, 3, 1536);
            step = inst.stepTime;
            for (const auto& p : inst.pipelines) widths += (widths.empty() ? "" : "+") + fmt::format("{}w{}", p.nodes, set->forNodes(p.nodes)->width);
        }
        fmt::print("{{\"bench\":\"widths\",\"case\":\"gpt3\",\"planner\":\"{}\",\"plans\":{},\"min_nodes\":{},\"max_nodes\":{},"
                   "\"pipelines\":\"{}\",\"step_s\":{:.4f},\"samples_per_s\":{:.2f}}}\n",
                   name(width), set.has_value(), set ? set->minNodes : 0, set ? set->maxNodes : 0, widths, step,
                   step > 0 ? 1536 / step : 0.0);
        if (width == 0) {
            if (!set) status = 1;
            kilnStep = step;
        } else if (set && step < kilnStep * (1 - 1e-9)) {
            status = 1;
        }
    }

    kiln::arch::ModelConfig l24;
    l24.vocabSize = 50257;
    l24.blocks = 22;
    l24.dModel = 2048;
    l24.heads = 16;
    l24.seqLen = 2048;
    const auto l24Profile = syntheticProfile(l24, 4, 300.0);
    for (std::uint32_t n : {1u, 2u, 3u}) {
        double times[3] = {0, 0, 0};
        std::uint32_t chosen = 0;
        int k = 0;
        for (std::uint32_t width : {0u, 1u, 8u}) {
            const auto set = plan(l24Profile, nodesOf8(n, width), 0, 64);
            const PipelineTemplate* t = set ? set->forNodes(n) : nullptr;
            if (t) times[k] = t->stepTime(t->referenceMicrobatches);
            if (width == 0 && t) chosen = t->width;
            ++k;
        }
        fmt::print("{{\"bench\":\"widths\",\"case\":\"l24\",\"nodes\":{},\"kiln_width\":{},\"kiln_step_s\":{:.4f},"
                   "\"one_rank_stages_step_s\":{:.4f},\"whole_node_stages_step_s\":{:.4f},\"whole_node_over_kiln\":{:.3f},"
                   "\"one_rank_over_kiln\":{:.3f}}}\n",
                   n, chosen, times[0], times[1], times[2], times[0] > 0 ? times[2] / times[0] : 0.0,
                   times[0] > 0 ? times[1] / times[0] : 0.0);
        if (times[0] == 0.0 || (times[1] > 0 && times[1] < times[0] * (1 - 1e-9)) || (times[2] > 0 && times[2] < times[0] * (1 - 1e-9)))
            status = 1;
    }

    const auto t0 = Clock::now();
    const auto set = plan(gpt3Profile, nodesOf8(4096, 0), 2, 1536);
    const double templates = std::chrono::duration<double>(Clock::now() - t0).count();
    const auto t1 = Clock::now();
    if (set) instantiate(*set, 4096, 3, 1536);
    const double instantiation = std::chrono::duration<double>(Clock::now() - t1).count();
    fmt::print("{{\"bench\":\"widths\",\"case\":\"scale\",\"nodes\":4096,\"plans\":{},\"template_seconds\":{:.3f},"
               "\"instantiation_seconds\":{:.3f}}}\n",
               set.has_value(), templates, instantiation);
    if (!set || templates + instantiation > 1.0) status = 1;
    if (status) std::fprintf(stderr, "bench_widths: kiln's widths lost to a fixed width, failed to plan, or were slow\n");
    return status;
}
