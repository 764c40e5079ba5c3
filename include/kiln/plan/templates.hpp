// Pipeline templates: for every node count n, the best pipeline of n nodes.
//
// What runs (docs/performance.md, "The planner"): every stage spans w ranks of one node
// (w dividing the node's g ranks; w > 1 splits its layers among them,
// tensor parallelism, see model/shard_spec.hpp). An n-node template of width
// w is a pipeline of S = n * g / w stages; stage s runs on the w ranks
// [(s % (g/w)) w, + w) of the pipeline's node s / (g/w), so a node's ranks
// hold consecutive stages and talk over the node's own links. Per
// microbatch, stage s costs
//     t_s = sum over its layers ((forward + backward) / w + tensor sums)
//           + 2 * out_s / B(s)
// (tensor sums: the all-reduces of partial results inside the stage, at the
// intra-node bandwidth; out_s its activation out and the gradient back; B(s)
// the intra-node bandwidth when stage s + 1 is on the same node, the
// inter-node one when it is not, nothing after the last stage). With m
// microbatches, 1F1B takes
//     T(m) = sum_s t_s + (m - 1) * max_s t_s + sync + update,
// sync = max over the pipeline's nodes of 2 * (parameter bytes of the node's
// stages) / B_inter: every stage sums its gradients with the other replicas
// by a ring all-reduce, which moves about twice its bytes through the node's
// link, and the node's stages share that link; update = max over stages of
// their layers' AdamW update time (measured profiles; 0 in synthetic ones). Stage s holds the activations
// of min(S - s, m) microbatches in flight (act_s: what its layers keep for
// backward, measured on the CPU by kiln profile, plus the activation it
// received); each of its ranks must fit
//     4 * param_bytes_s (weights, gradients, 2 AdamW moments)
//       + in_flight * act_s + its largest layer's param bytes (temporaries)
//       + the runtime's bytes (measured by kiln profile on the CPU)
//       + the loader's budget (CPU runs) <= memory per rank,
// both counted per rank: the split parameters and activations divided by w,
// the whole ones (norms, some biases, the positions, residuals) not.
// A template for n nodes minimises sum_s t_s + (m_n - 1) max_s t_s exactly
// for each width and keeps the best width, m_n being the microbatches one
// pipeline gets when n-node pipelines fill the cluster; the once-per-step
// sync (the same for every width) is left out of the choice and counted in T
// for instantiation. A model of L layers has templates only for n * g / w <= L.
#pragma once

#include "kiln/plan/cluster.hpp"
#include "kiln/plan/layer_profile.hpp"

#include <algorithm>
#include <map>
#include <memory>
#include <tuple>
#include <cstdint>
#include <vector>

namespace kiln::plan {

struct Stage {
    std::uint32_t firstLayer = 0;
    std::uint32_t endLayer = 0;  // one past the last
    double time = 0.0;           // t_s, seconds per microbatch
    double sync = 0.0;           // seconds per step of this stage's gradient sums alone
    double memory = 0.0;         // bytes on its rank with the reference microbatches in flight
    double paramBytes = 0.0, activationBytes = 0.0;  // activations per microbatch in flight
    double compute = 0.0;  // of `time`: the layers' own work, no transfer (0 in plan files: use `time`)
    double optimizer = 0.0;  // seconds per step of its AdamW update
    double updateBytes = 0.0;  // its largest layer's parameter bytes on a rank
    double runtimeBytes = 0.0;  // what a rank holds besides tensors: the profile's runtime, the loader's budget
                                // (and under full recomputation the largest layer's activations, rebuilt)
    // Its layers recomputed in full in backward (train.recompute = full, or
    // auto where the stage would not fit in memory otherwise).
    bool recompute = false;

    // Bytes on its rank with `inFlight` microbatches' activations kept:
    // weights, gradients and both AdamW moments, the activations, and one
    // layer's worth of parameter-shaped temporaries (a weight's gradient
    // before it is added to the kept one, the update's denominators; AdamW
    // runs layer by layer). The temporaries are added, not overlapped with
    // the activations: host blocks are reused by exact size
    // (model/cpu_allocations.hpp), and a weight-shaped block does not take
    // an activation's place. Then the rank's runtime (libraries, threads).
    double memoryWith(std::uint64_t inFlight) const {
        return 4.0 * paramBytes + double(inFlight) * activationBytes + updateBytes + runtimeBytes;
    }
};

struct PipelineTemplate {
    std::uint32_t nodes = 0;        // 0: no template for this node count
    std::uint32_t ranksPerNode = 1;  // g
    std::uint32_t width = 1;         // w: ranks per stage (tensor parallelism), dividing g
    // nodes * g / w; stage i on ranks [(i % (g / w)) w, + w) of node i / (g / w)
    std::vector<Stage> stages;
    std::uint32_t stagesPerNode() const { return ranksPerNode / width; }
    std::uint64_t referenceMicrobatches = 0;

    double bottleneck() const;
    double latency() const;  // sum of stage times: fill and drain
    // sum t + (m - 1) max t: what the template minimises.
    double pipelineTime(std::uint64_t microbatches) const;
    double sync() const;  // max over nodes of the sum of its stages' sync
    double optimizer() const;  // max over stages of their optimizer update
    // Once per step, whatever the microbatches: the gradient sums, then the update.
    double perStep() const { return sync() + optimizer(); }
    // T(m): seconds for one step of m microbatches, gradient sums and update included.
    double stepTime(std::uint64_t microbatches) const;

private:
    // Computed once: the instantiation asks for them millions of times.
    mutable double bottleneck_ = -1.0, latency_ = -1.0, sync_ = -1.0, optimizer_ = -1.0;
};

struct TemplateSet {
    std::uint32_t minNodes = 0, maxNodes = 0;
    double memoryPerRank = 0.0;  // what every stage had to fit in
    std::vector<PipelineTemplate> templates;  // templates[n - minNodes] is the one for n nodes
    // The best n-node pipelines of the other widths (what plan.pipelines can pin: '2w4').
    std::vector<PipelineTemplate> alternatives;
    // nullptr when no n-node pipeline fits (see planTemplates). `width` 0:
    // the best width; otherwise the best n-node pipeline of that width.
    const PipelineTemplate* forNodes(std::uint32_t n, std::uint32_t width = 0) const;

    // A template that lost nodes, patched: forNodes(n, width) without the
    // node positions `without` (ascending), whose layers the neighbouring
    // nodes' stages take (a run of lost positions split between the stage
    // before it and the stage after it where their times balance best), every
    // stage costed again. A failed pipeline with no node to take the failed
    // one's place runs on as this: only the failed node's layers move, to its
    // neighbours, and a node admitted later takes them back. nullptr when
    // the set has no cost model (read from a plan file), nothing is left, or a
    // stage of it would not fit one microbatch in memory. Cached: the pointer
    // stays valid while the set lives.
    const PipelineTemplate* patched(std::uint32_t n, std::uint32_t width, const std::vector<std::uint32_t>& without) const;

    // What patched() costs stages with (set by planTemplates).
    std::shared_ptr<const ModelProfile> profile;
    ClusterSpec cluster;

private:
    struct PatchKey {
        std::uint32_t n, width;
        std::vector<std::uint32_t> without;
        bool operator<(const PatchKey& o) const {
            return std::tie(n, width, without) < std::tie(o.n, o.width, o.without);
        }
    };
    std::shared_ptr<std::map<PatchKey, std::shared_ptr<const PipelineTemplate>>> patches_ =
        std::make_shared<std::map<PatchKey, std::shared_ptr<const PipelineTemplate>>>();
};

// Templates for n = smallest that fits .. min(layers, largest that leaves
// f + 1 pipelines). `globalMicrobatches`: microbatches of a global batch.
// Throws InputError naming what would fit when no template exists.
TemplateSet planTemplates(const ModelProfile& profile, const ClusterSpec& cluster, std::uint32_t f,
                          std::uint64_t globalMicrobatches);

// planTemplates in two parts: the templates of every node count up to the
// layers' limit, which do not depend on f, and the range f leaves (the
// longest pipeline beside f of the smallest). planTemplates(p, c, f, m) is
// restrictToTolerance(planTemplatesForAnyF(p, c, m), c, f).
TemplateSet planTemplatesForAnyF(const ModelProfile& profile, const ClusterSpec& cluster, std::uint64_t globalMicrobatches);
TemplateSet restrictToTolerance(TemplateSet set, const ClusterSpec& cluster, std::uint32_t f);

// planTemplates(...).minNodes without the rest: the fewest nodes a pipeline
// of this model fits on (same errors).
std::uint32_t smallestTemplateNodes(const ModelProfile& profile, const ClusterSpec& cluster,
                                    std::uint64_t globalMicrobatches);

// m_n: the microbatches one n-node pipeline gets when such pipelines fill the cluster.
std::uint64_t referenceMicrobatches(std::uint32_t n, const ClusterSpec& cluster, std::uint64_t globalMicrobatches);

// The best template for exactly n nodes with m microbatches, by trying every
// partition (exponential): the reference the tests hold planTemplates to.
PipelineTemplate exhaustiveTemplate(const ModelProfile& profile, const ClusterSpec& cluster, std::uint32_t n,
                                    std::uint64_t microbatches, bool& found);

}  // namespace kiln::plan
