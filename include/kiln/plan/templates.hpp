// Pipeline templates: for every node count n, the best pipeline of n nodes.
//
// Cost model (README, "The planner"). A stage is a contiguous range of layers
// on one node; the node's g ranks split its work and its memory evenly (as
// tensor parallelism does; the profile's times are for one rank doing all of
// it). Per microbatch, stage s costs
//     t_s = sum over its layers (forward + backward) / g + 2 * out_s / B_inter
// (activation out and its gradient back; none after the last stage). With m
// microbatches, 1F1B takes
//     T(m) = sum_s t_s + (m - 1) * max_s t_s + max_s sync_s,
// sync_s = 2 * params_s / B_inter: the stage's gradients summed over the
// replicas by a ring all-reduce, which moves at most twice the bytes through a
// node's link whatever the number of replicas. Stage s (0-based, of S) holds
// the activations of min(S - s, m) microbatches in flight; each rank must fit
//     (4 * param_bytes_s (weights, gradients, 2 AdamW moments) + in_flight * act_s) / g <= memory per rank.
// A template for n nodes minimises sum_s t_s + (m_n - 1) max_s t_s exactly,
// m_n being the microbatches one pipeline gets when n-node pipelines fill the
// cluster; the once-per-step sync is left out of the choice (it depends only
// on how parameters are split, and is counted in T for instantiation).
#pragma once

#include "kiln/plan/cluster.hpp"
#include "kiln/plan/layer_profile.hpp"

#include <cstdint>
#include <vector>

namespace kiln::plan {

struct Stage {
    std::uint32_t firstLayer = 0;
    std::uint32_t endLayer = 0;  // one past the last
    double time = 0.0;           // t_s, seconds per microbatch
    double sync = 0.0;           // seconds per step (gradient sums)
    double memory = 0.0;         // bytes per rank
};

struct PipelineTemplate {
    std::uint32_t nodes = 0;    // 0: no template for this node count
    std::vector<Stage> stages;  // stage i on node i of the pipeline
    std::uint64_t referenceMicrobatches = 0;

    double bottleneck() const;
    double latency() const;  // sum of stage times: fill and drain
    // sum t + (m - 1) max t: what the template minimises.
    double pipelineTime(std::uint64_t microbatches) const;
    double sync() const;  // max_s sync_s
    // T(m): seconds for one step of m microbatches, gradient sums included.
    double stepTime(std::uint64_t microbatches) const;

private:
    // Computed once: the instantiation asks for them millions of times.
    mutable double bottleneck_ = -1.0, latency_ = -1.0, sync_ = -1.0;
};

struct TemplateSet {
    std::uint32_t minNodes = 0, maxNodes = 0;
    std::vector<PipelineTemplate> templates;  // templates[n - minNodes] is the one for n nodes
    // nullptr when no n-node pipeline fits (see planTemplates).
    const PipelineTemplate* forNodes(std::uint32_t n) const;
};

// Templates for n = smallest that fits .. min(layers, largest that leaves
// f + 1 pipelines). `globalMicrobatches`: microbatches of a global batch.
// Throws InputError naming what would fit when no template exists.
TemplateSet planTemplates(const ModelProfile& profile, const ClusterSpec& cluster, std::uint32_t f,
                          std::uint64_t globalMicrobatches);

// m_n: the microbatches one n-node pipeline gets when such pipelines fill the cluster.
std::uint64_t referenceMicrobatches(std::uint32_t n, const ClusterSpec& cluster, std::uint64_t globalMicrobatches);

// The best template for exactly n nodes with m microbatches, by trying every
// partition (exponential): the reference the tests hold planTemplates to.
PipelineTemplate exhaustiveTemplate(const ModelProfile& profile, const ClusterSpec& cluster, std::uint32_t n,
                                    std::uint64_t microbatches, bool& found);

}  // namespace kiln::plan
