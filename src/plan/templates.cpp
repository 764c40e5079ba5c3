#include "kiln/plan/templates.hpp"

#include "kiln/base/error.hpp"
#include "kiln/arch/shard_spec.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>

namespace kiln::plan {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Where a stage's activation goes: nowhere (the last stage), to the next rank
// of the same node, or to the next node.
enum class Link { None, Intra, Inter };

// The link after stage `position` of a pipeline of `stages` stages, `g` per node.
Link linkAfter(std::uint32_t position, std::uint32_t stages, std::uint32_t g) {
    if (position + 1 == stages) return Link::None;
    return (position + 1) % g == 0 ? Link::Inter : Link::Intra;
}

// Prefix sums of a profile and the cost model's terms for a layer range, for
// stages `width` ranks wide (tensor parallelism inside a node, see
// shard_spec.hpp): each rank computes 1/width of the stage's layers, holds
// its share of their parameters and of their split activations, and the
// stage sums partial results over the node's links, each sum a ring
// all-reduce of a layer's output moving 2 (w - 1) / w of its bytes: per
// microbatch four in a block (two forward, two backward), one in the
// embedding and in the output layer.
class CostModel {
public:
    CostModel(const ModelProfile& p, const ClusterSpec& c, std::uint32_t width)
        : cluster_(c), layers_(p.layers.size()), width_(width),
          runtime_(double(p.runtimeBytes) + c.loaderBytesPerRank), mode_(p.model.recompute) {
        for (auto* prefix : {&compute_, &computeFull_, &optimizer_, &params_, &rankParams_, &activations_, &inputs_})
            prefix->assign(layers_ + 1, 0.0);
        const double w = width;
        for (std::size_t i = 0; i < layers_; ++i) {
            const auto& layer = p.layers[i];
            const auto index = static_cast<std::uint32_t>(i);
            const bool known = p.model.numLayers() == layers_;  // the profile's model (always, but for hand-made ones)
            const double sums = width == 1 ? 0.0 : (layer.kind == "block" ? 4.0 : 1.0);
            const double sumBytes = layer.kind == "output" ? double(layer.outputBytes) / std::max(1.0, double(p.model.vocabSize)) *
                                                                 p.model.dModel
                                                           : double(layer.outputBytes);
            const double tensorSums = sums * 2.0 * (w - 1.0) / w * sumBytes / c.intraBandwidth;
            compute_[i + 1] = compute_[i] + (layer.forwardSeconds + layer.backwardSeconds) / w + tensorSums;
            // Full recomputation runs each forward twice (a block's two forward tensor sums too).
            computeFull_[i + 1] = computeFull_[i] + (2.0 * layer.forwardSeconds + layer.backwardSeconds) / w +
                                  (layer.kind == "block" ? 1.5 : 1.0) * tensorSums;
            params_[i + 1] = params_[i] + double(layer.paramBytes);
            optimizer_[i + 1] = optimizer_[i] + layer.optimizerSeconds / w;
            const double paramShare = known && width > 1 ? double(arch::parametersPerRank(p.model, index, width)) /
                                                               double(p.model.parametersOf(index))
                                                         : 1.0;
            rankParams_[i + 1] = rankParams_[i] + double(layer.paramBytes) * paramShare;
            layerParams_.push_back(double(layer.paramBytes) * paramShare);
            const double split = known && width > 1 ? splitActivationShare(p.model, index) : 0.0;
            const double kept = double(layer.activationBytes) * (1.0 - split + split / w);
            activations_[i + 1] = activations_[i] + kept;
            // Full recomputation keeps each layer's input alone (whole on every rank of a stage; the token ids,
            // int64, for the embedding) and rebuilds one layer's activations at a time in backward.
            inputs_[i + 1] = inputs_[i] + (i == 0 ? 8.0 * double(p.microBatch) * p.model.seqLen : output_.back());
            rebuilt_.push_back(kept);
            output_.push_back(double(layer.outputBytes));
        }
        // Range maxima of the layers' parameters in O(1): largest_[k][i] is
        // the largest of layers [i, i + 2^k).
        largest_.push_back(layerParams_);
        for (std::size_t span = 2; span <= layers_; span *= 2) {
            const auto& half = largest_.back();
            std::vector<double> next(layers_ - span + 1);
            for (std::size_t i = 0; i < next.size(); ++i) next[i] = std::max(half[i], half[i + span / 2]);
            largest_.push_back(std::move(next));
        }
    }

    std::uint32_t layers() const { return static_cast<std::uint32_t>(layers_); }
    std::uint32_t width() const { return width_; }
    std::uint32_t stagesPerNode() const { return std::max<std::uint32_t>(cluster_.ranksPerNode, 1) / width_; }
    // Whether stage [a, b) recomputes its layers in full: always with
    // train.recompute = full; with auto, where it would not fit otherwise.
    bool recomputes(std::uint32_t a, std::uint32_t b, std::uint64_t inFlight) const {
        using R = arch::ModelConfig::Recompute;
        return mode_ == R::Full || (mode_ == R::Auto && !fitsAs(a, b, inFlight, false));
    }
    double stageTime(std::uint32_t a, std::uint32_t b, Link link, bool full) const {
        const double compute = full ? computeFull_[b] - computeFull_[a] : compute_[b] - compute_[a];
        if (link == Link::None) return compute;
        return compute + 2.0 * output_[b - 1] / (link == Link::Intra ? cluster_.intraBandwidth : cluster_.interBandwidth);
    }
    double stageTime(std::uint32_t a, std::uint32_t b, Link link, std::uint64_t inFlight) const {
        return stageTime(a, b, link, recomputes(a, b, inFlight));
    }
    // The times a stage can take (auto: either way).
    std::vector<double> possibleTimes(std::uint32_t a, std::uint32_t b, Link link) const {
        using R = arch::ModelConfig::Recompute;
        if (mode_ == R::Auto) return {stageTime(a, b, link, false), stageTime(a, b, link, true)};
        return {stageTime(a, b, link, mode_ == R::Full)};
    }
    // Once per step, this stage's gradients summed with the other replicas
    // (a ring all-reduce moves about twice the bytes through the node's link;
    // a stage's ranks each sum their share, together the stage's bytes).
    double sync(std::uint32_t a, std::uint32_t b) const { return 2.0 * (params_[b] - params_[a]) / cluster_.interBandwidth; }
    // Per microbatch in flight: what the layers keep for backward and, after
    // the first stage, the activation received (whole on every rank); under
    // full recomputation the layers' inputs, of which the activation received is the first.
    double inFlightBytes(std::uint32_t a, std::uint32_t b, bool full) const {
        if (full) return inputs_[b] - inputs_[a];
        return activations_[b] - activations_[a] + (a > 0 ? output_[a - 1] : 0.0);
    }
    // What a rank holds besides the kept tensors: the profile's runtime, the
    // loader's budget, and under full recomputation the largest layer's
    // activations, rebuilt for its backward (one microbatch's, at a time),
    // with the gradients of them its backward makes meanwhile: 1.5 times its
    // activations (measured on gpt2 and llama at seq_len 256: resident
    // against plan 1.14x counting them once, 0.90x twice).
    double runtimeBytes(std::uint32_t a, std::uint32_t b, bool full) const {
        return runtime_ + (full ? 1.5 * *std::max_element(rebuilt_.begin() + a, rebuilt_.begin() + b) : 0.0);
    }
    // The largest of layers [a, b)'s parameter bytes on a rank.
    double largestLayer(std::uint32_t a, std::uint32_t b) const {
        std::size_t k = 0;
        while ((std::size_t{2} << k) <= b - a) ++k;
        return std::max(largest_[k][a], largest_[k][b - (std::size_t{1} << k)]);
    }
    // Bytes on one of the stage's ranks with `inFlight` microbatches' activations kept.
    double memory(std::uint32_t a, std::uint32_t b, std::uint64_t inFlight, bool full) const {
        Stage s;
        s.paramBytes = rankParams_[b] - rankParams_[a];
        s.activationBytes = inFlightBytes(a, b, full);
        s.updateBytes = largestLayer(a, b);
        s.runtimeBytes = runtimeBytes(a, b, full);
        return s.memoryWith(inFlight);
    }
    // As the stage would run (recomputing or not).
    double memory(std::uint32_t a, std::uint32_t b, std::uint64_t inFlight) const {
        return memory(a, b, inFlight, recomputes(a, b, inFlight));
    }
    bool fits(std::uint32_t a, std::uint32_t b, std::uint64_t inFlight) const {
        return fitsAs(a, b, inFlight, recomputes(a, b, inFlight));
    }
    Stage stage(std::uint32_t a, std::uint32_t b, Link link, std::uint64_t inFlight) const {
        const bool full = recomputes(a, b, inFlight);
        Stage s{a, b, stageTime(a, b, link, full), sync(a, b), memory(a, b, inFlight, full), rankParams_[b] - rankParams_[a],
                inFlightBytes(a, b, full), stageTime(a, b, Link::None, full), optimizer_[b] - optimizer_[a],
                largestLayer(a, b), runtimeBytes(a, b, full)};
        s.recompute = full;
        return s;
    }

private:
    bool fitsAs(std::uint32_t a, std::uint32_t b, std::uint64_t inFlight, bool full) const {
        return memory(a, b, inFlight, full) <= cluster_.memoryPerRank;
    }

    ClusterSpec cluster_;
    std::size_t layers_;
    std::uint32_t width_;
    double runtime_;
    arch::ModelConfig::Recompute mode_;  // train.recompute
    std::vector<double> compute_, computeFull_, optimizer_, params_, rankParams_, activations_, inputs_, output_,
        layerParams_, rebuilt_;
    std::vector<std::vector<double>> largest_;
};

// Suffix dynamic programme over layer boundaries for a pipeline of S stages:
// value[k][i] is the best way to run layers [i, L) as its last k stages, where
// the first of them (position S - k) holds min(k, m) microbatches in flight
// and sends over linkAfter(S - k). `combine` folds a stage's time into the
// value of the rest; stages slower than `limit` are not allowed.
template <typename Combine>
std::vector<std::vector<double>> suffixProgramme(const CostModel& cost, std::uint32_t S, std::uint64_t m, double limit,
                                                 Combine combine, std::vector<std::vector<std::uint32_t>>& cut) {
    const std::uint32_t L = cost.layers();
    std::vector<std::vector<double>> value(S + 1, std::vector<double>(L + 1, kInf));
    cut.assign(S + 1, std::vector<std::uint32_t>(L + 1, 0));
    value[0][L] = 0.0;
    for (std::uint32_t k = 1; k <= S; ++k) {
        const std::uint64_t inFlight = std::min<std::uint64_t>(k, m);
        const Link link = linkAfter(S - k, S, cost.stagesPerNode());
        for (std::uint32_t i = 0; i + k <= L; ++i) {
            // The stage [i, j) leaves k - 1 stages for [j, L), so j <= L - (k - 1).
            for (std::uint32_t j = i + 1; j + (k - 1) <= L; ++j) {
                if (value[k - 1][j] == kInf) continue;
                if (!cost.fits(i, j, inFlight)) break;  // and bigger
                const double t = cost.stageTime(i, j, link, inFlight);
                if (t > limit) continue;
                const double v = combine(t, value[k - 1][j]);
                if (v < value[k][i]) {
                    value[k][i] = v;
                    cut[k][i] = j;
                }
            }
        }
    }
    return value;
}

PipelineTemplate rebuild(const CostModel& cost, const std::vector<std::vector<std::uint32_t>>& cut, std::uint32_t n,
                         std::uint64_t m) {
    PipelineTemplate t;
    t.nodes = n;
    t.ranksPerNode = cost.stagesPerNode() * cost.width();
    t.width = cost.width();
    t.referenceMicrobatches = m;
    const std::uint32_t S = n * cost.stagesPerNode();
    std::uint32_t i = 0;
    for (std::uint32_t k = S; k >= 1; --k) {
        const std::uint32_t j = cut[k][i];
        t.stages.push_back(cost.stage(i, j, linkAfter(S - k, S, cost.stagesPerNode()), std::min<std::uint64_t>(k, m)));
        i = j;
    }
    return t;
}

// The exact optimum of T(m) = sum t + (m - 1) max t for the n * g / w stages of
// n nodes: for each candidate bottleneck B (a stage time that can occur), the
// smallest sum with every stage at most B; candidates in increasing order
// until (m - 1) B + (the smallest sum of all) can no longer beat the best found.
// For many node counts at once: the link after the stage k from a pipeline's
// end depends on k alone (S is a multiple of the stages per node), so one
// suffix programme of the longest pipeline holds the answer for every shorter
// one with the same microbatches in flight. found[i]: whether ns[i] has one.
std::vector<PipelineTemplate> bestTemplates(const CostModel& cost, const std::vector<std::uint32_t>& ns,
                                            const std::vector<std::uint64_t>& ms, const std::vector<double>& candidates,
                                            std::vector<bool>& found) {
    std::vector<PipelineTemplate> best(ns.size());
    found.assign(ns.size(), false);
    std::map<std::uint64_t, std::vector<std::size_t>> byMicrobatches;
    for (std::size_t i = 0; i < ns.size(); ++i)
        if (ns[i] * cost.stagesPerNode() <= cost.layers()) byMicrobatches[ms[i]].push_back(i);
    const auto maxOf = [](double t, double rest) { return std::max(t, rest); };
    const auto sumOf = [](double t, double rest) { return t + rest; };
    std::vector<std::vector<std::uint32_t>> cut;
    for (const auto& [m, members] : byMicrobatches) {
        const auto stagesOf = [&](std::size_t i) { return ns[i] * cost.stagesPerNode(); };
        std::uint32_t longest = 0;
        for (auto i : members) longest = std::max(longest, stagesOf(i));
        const auto bottlenecks = suffixProgramme(cost, longest, m, kInf, maxOf, cut);
        const auto sums = suffixProgramme(cost, longest, m, kInf, sumOf, cut);
        struct Search {
            std::size_t index;
            double bottleneck, smallestSum, bestTime = kInf;
            bool done = false;
        };
        std::vector<Search> searches;
        for (auto i : members) {
            const double b = bottlenecks[stagesOf(i)][0];
            if (b < kInf) searches.push_back({i, b, sums[stagesOf(i)][0]});
        }
        if (searches.empty()) continue;
        double lowest = kInf;
        for (const auto& s : searches) lowest = std::min(lowest, s.bottleneck);
        auto it = std::lower_bound(candidates.begin(), candidates.end(), lowest * (1 - 1e-12));
        for (; it != candidates.end(); ++it) {
            const double B = *it;
            std::uint32_t needed = 0;  // the longest pipeline still searching at this B
            bool any = false;
            for (auto& s : searches) {
                if (s.done) continue;
                any = true;
                if (s.smallestSum + double(m - 1) * B >= s.bestTime) {
                    s.done = true;
                    continue;
                }
                if (B >= s.bottleneck * (1 - 1e-12)) needed = std::max(needed, stagesOf(s.index));
            }
            if (!any) break;
            if (needed == 0) continue;
            const auto value = suffixProgramme(cost, needed, m, B * (1 + 1e-12), sumOf, cut);
            for (auto& s : searches) {
                if (s.done || B < s.bottleneck * (1 - 1e-12) || value[stagesOf(s.index)][0] == kInf) continue;
                PipelineTemplate t = rebuild(cost, cut, ns[s.index], m);
                if (t.pipelineTime(m) < s.bestTime) {
                    s.bestTime = t.pipelineTime(m);
                    best[s.index] = std::move(t);
                    found[s.index] = true;
                }
            }
        }
    }
    return best;
}

bool bestTemplate(const CostModel& cost, std::uint32_t n, std::uint64_t m, const std::vector<double>& candidates,
                  PipelineTemplate& best) {
    std::vector<bool> found;
    auto all = bestTemplates(cost, {n}, {m}, candidates, found);
    if (!found[0]) return false;
    best = std::move(all[0]);
    return true;
}

}  // namespace

std::uint64_t referenceMicrobatches(std::uint32_t n, const ClusterSpec& cluster, std::uint64_t globalMicrobatches) {
    const std::uint64_t pipelines = std::max<std::uint64_t>(1, cluster.nodes / n);
    return std::max<std::uint64_t>(1, (globalMicrobatches + pipelines - 1) / pipelines);
}

double PipelineTemplate::bottleneck() const {
    if (bottleneck_ < 0) {
        bottleneck_ = 0.0;
        for (const auto& s : stages) bottleneck_ = std::max(bottleneck_, s.time);
    }
    return bottleneck_;
}

double PipelineTemplate::latency() const {
    if (latency_ < 0) {
        latency_ = 0.0;
        for (const auto& s : stages) latency_ += s.time;
    }
    return latency_;
}

double PipelineTemplate::pipelineTime(std::uint64_t microbatches) const {
    return microbatches == 0 ? 0.0 : latency() + double(microbatches - 1) * bottleneck();
}

double PipelineTemplate::sync() const {
    if (sync_ < 0) {
        sync_ = 0.0;
        const std::size_t g = stagesPerNode();
        for (std::size_t first = 0; first < stages.size(); first += g) {
            double node = 0.0;
            for (std::size_t s = first; s < std::min(first + g, stages.size()); ++s) node += stages[s].sync;
            sync_ = std::max(sync_, node);
        }
    }
    return sync_;
}

double PipelineTemplate::optimizer() const {
    if (optimizer_ < 0) {
        optimizer_ = 0.0;
        for (const auto& s : stages) optimizer_ = std::max(optimizer_, s.optimizer);
    }
    return optimizer_;
}

double PipelineTemplate::stepTime(std::uint64_t microbatches) const {
    return microbatches == 0 ? 0.0 : pipelineTime(microbatches) + perStep();
}

const PipelineTemplate* TemplateSet::patched(std::uint32_t n, std::uint32_t width,
                                             const std::vector<std::uint32_t>& without) const {
    if (without.empty()) return forNodes(n, width);
    const PipelineTemplate* base = forNodes(n, width);
    if (!base || !profile || without.size() >= n) return nullptr;
    PatchKey key{n, base->width, without};
    if (const auto it = patches_->find(key); it != patches_->end()) return it->second.get();
    const CostModel cost(*profile, cluster, base->width);
    const std::uint32_t spn = base->stagesPerNode();
    // The cuts of the surviving stages: a lost run [a, b) of layers goes to the stage before it
    // (up to c) and the one after it (from c), c where the slower of the two is fastest.
    std::vector<std::uint32_t> firsts, ends;  // of the surviving stages
    for (std::uint32_t k = 0; k < n; ++k) {
        if (std::binary_search(without.begin(), without.end(), k)) continue;
        for (std::uint32_t s = k * spn; s < (k + 1) * spn; ++s) {
            firsts.push_back(base->stages[s].firstLayer);
            ends.push_back(base->stages[s].endLayer);
        }
    }
    const std::uint32_t S = static_cast<std::uint32_t>(firsts.size());
    const std::uint64_t m = std::max<std::uint64_t>(1, base->referenceMicrobatches);
    const auto timeOf = [&](std::uint32_t i, std::uint32_t a, std::uint32_t b) {
        return cost.stageTime(a, b, linkAfter(i, S, spn), std::min<std::uint64_t>(S - i, m));
    };
    for (std::uint32_t i = 0; i + 1 <= S; ++i) {
        const std::uint32_t gapStart = ends[i], gapEnd = i + 1 < S ? firsts[i + 1] : base->stages.back().endLayer;
        if (i == 0 && firsts[0] > 0) firsts[0] = 0;  // lost positions before the first survivor
        if (gapStart == gapEnd) continue;
        if (i + 1 == S) {
            ends[i] = gapEnd;
            continue;
        }
        std::uint32_t best = gapStart;
        double bestTime = kInf;
        for (std::uint32_t c = gapStart; c <= gapEnd; ++c) {
            const double t = std::max(timeOf(i, firsts[i], c), timeOf(i + 1, c, ends[i + 1]));
            if (t < bestTime) {
                bestTime = t;
                best = c;
            }
        }
        ends[i] = best;
        firsts[i + 1] = best;
    }
    auto t = std::make_shared<PipelineTemplate>();
    t->nodes = n - static_cast<std::uint32_t>(without.size());
    t->ranksPerNode = base->ranksPerNode;
    t->width = base->width;
    t->referenceMicrobatches = base->referenceMicrobatches;
    for (std::uint32_t i = 0; i < S; ++i) {
        if (firsts[i] >= ends[i]) return nullptr;  // a stage left without layers: not a pipeline
        if (!cost.fits(firsts[i], ends[i], 1)) {
            patches_->emplace(std::move(key), nullptr);
            return nullptr;
        }
        t->stages.push_back(cost.stage(firsts[i], ends[i], linkAfter(i, S, spn), std::min<std::uint64_t>(S - i, m)));
    }
    return patches_->emplace(std::move(key), std::move(t)).first->second.get();
}

const PipelineTemplate* TemplateSet::forNodes(std::uint32_t n, std::uint32_t width) const {
    if (n < minNodes || n > maxNodes || templates[n - minNodes].nodes == 0) return nullptr;
    const PipelineTemplate& best = templates[n - minNodes];
    if (width == 0 || best.width == width) return &best;
    for (const auto& t : alternatives)
        if (t.nodes == n && t.width == width) return &t;
    return nullptr;
}

namespace {

// The widths a stage may have: the pinned one, or every divisor of a node's
// ranks that leaves each rank at least one attention head.
std::vector<std::uint32_t> stageWidths(const ModelProfile& profile, const ClusterSpec& cluster) {
    const std::uint32_t g = std::max<std::uint32_t>(cluster.ranksPerNode, 1);
    if (cluster.stageWidth > 0) {
        if (g % cluster.stageWidth != 0)
            throw InputError(fmt::format("{} = {} does not divide a node's {} ranks "
                                         "(cluster.ranks_per_node): a stage spans ranks of one node and every rank is in "
                                         "one stage\n  Use a divisor of {}, or 0 to let the planner choose.",
                                         cluster.stageWidthOrigin, cluster.stageWidth, g, g));
        if (const auto why = arch::widthProblem(profile.model, cluster.stageWidth); !why.empty())
            throw InputError(fmt::format("{} = {}: {}\n  Use a smaller width, or 0 to let the planner choose.",
                                         cluster.stageWidthOrigin, cluster.stageWidth, why));
        return {cluster.stageWidth};
    }
    std::vector<std::uint32_t> widths;
    for (std::uint32_t w = 1; w <= g; ++w)
        if (g % w == 0 && arch::widthProblem(profile.model, w).empty()) widths.push_back(w);
    return widths;
}

// A stage-time candidate list per width (the bottlenecks bestTemplate tries).
std::vector<double> bottleneckCandidates(const CostModel& cost) {
    const std::uint32_t L = cost.layers();
    std::vector<double> candidates;
    for (std::uint32_t a = 0; a < L; ++a)
        for (std::uint32_t b = a + 1; b <= L; ++b)
            for (Link link : {Link::None, Link::Intra, Link::Inter})
                for (double t : cost.possibleTimes(a, b, link)) candidates.push_back(t);
    std::sort(candidates.begin(), candidates.end());
    candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
    return candidates;
}

}  // namespace

namespace {

// planTemplates, or with `smallestOnly` just its smallest template (its minNodes).
// Every node count's template up to the layers' limit; fault.f only bounds them afterwards (restrictToTolerance).
TemplateSet plan(const ModelProfile& profile, const ClusterSpec& cluster, std::uint64_t globalMicrobatches,
                 bool smallestOnly) {
    const std::uint32_t L = static_cast<std::uint32_t>(profile.layers.size()), g = std::max<std::uint32_t>(cluster.ranksPerNode, 1);
    const auto widths = stageWidths(profile, cluster);
    const std::uint32_t widest = widths.back();
    if (L < g / widest)
        throw InputError(fmt::format(
            "a node's {} ranks hold at least {} stage{} ({} rank{} wide), but the model has only {} layers (model.blocks "
            "= {} plus the embedding and the output layer)\n  Use model.blocks >= {}, wider stages (plan.stage_width), "
            "or fewer ranks per node (cluster.ranks_per_node).",
            g, g / widest, g / widest == 1 ? "" : "s", widest, widest == 1 ? "" : "s", L, L - 2, g / widest - 2));
    std::vector<CostModel> costs;
    std::vector<std::vector<double>> candidates;
    for (std::uint32_t w : widths) {
        costs.emplace_back(profile, cluster, w);
        candidates.push_back(bottleneckCandidates(costs.back()));
    }
    // The fastest pipeline of n nodes over every width (pipeline time with
    // its reference microbatches; the gradient sums do not depend on the width).
    // The others go to `others`.
    const auto bestOfWidths = [&](std::uint32_t n, PipelineTemplate& best, std::vector<PipelineTemplate>& others) {
        const std::uint64_t m = referenceMicrobatches(n, cluster, globalMicrobatches);
        bool found = false;
        for (std::size_t k = 0; k < costs.size(); ++k) {
            PipelineTemplate t;
            if (!bestTemplate(costs[k], n, m, candidates[k], t)) continue;
            if (!found || t.pipelineTime(m) < best.pipelineTime(m)) std::swap(best, t);
            if (found) others.push_back(std::move(t));
            found = true;
        }
        return found;
    };

    TemplateSet set;
    set.memoryPerRank = cluster.memoryPerRank;
    set.profile = std::make_shared<const ModelProfile>(profile);
    set.cluster = cluster;
    const std::uint32_t upper = std::min(L / (g / widest), cluster.nodes);
    std::uint32_t n = 1;
    PipelineTemplate t;
    std::vector<PipelineTemplate> others;
    for (; n <= upper; ++n) {
        others.clear();
        if (bestOfWidths(n, t, others)) break;
    }
    if (n > upper) {
        const CostModel& cost = costs.back();
        double largest = 0.0;
        for (std::uint32_t i = 0; i < L; ++i) largest = std::max(largest, cost.memory(i, i + 1, 1));
        throw InputError(fmt::format(
            "the model does not fit on {} node{} of {} rank{} with {:.3g} GB each: its largest layer alone needs {:.3g} GB "
            "on a rank of a stage {} rank{} wide (weights, gradients, AdamW moments, one microbatch of activations, a "
            "layer's temporaries, the runtime), the whole model {:.3g} GB; pipelines of more than {} node{} are not possible with {} layers\n  Give more memory "
            "per rank (plan.memory_gb), more nodes, more ranks per node, activation recomputation (train.recompute = "
            "auto or full), or a smaller model or micro-batch (train.micro_batch).",
            cluster.nodes, cluster.nodes == 1 ? "" : "s", g, g == 1 ? "" : "s", cluster.memoryPerRank / 1e9, largest / 1e9,
            widest, widest == 1 ? "" : "s", cost.memory(0, L, 1) / 1e9, upper, upper == 1 ? "" : "s", L));
    }
    set.minNodes = n;
    if (smallestOnly) {
        set.templates.push_back(t);
        set.maxNodes = n;
        return set;
    }
    const std::uint32_t limit = upper;
    set.templates.push_back(t);
    set.alternatives = std::move(others);
    set.maxNodes = n;
    // Longer pipelines hold more microbatches in flight on their first stages,
    // so a node count can have no template even though a smaller one has: such
    // counts stay empty (nodes == 0) and are never instantiated.
    // Every longer count at once, width by width (bestTemplates), then the fastest width of each.
    std::vector<std::uint32_t> counts;
    std::vector<std::uint64_t> micro;
    for (std::uint32_t k = n + 1; k <= limit; ++k) {
        counts.push_back(k);
        micro.push_back(referenceMicrobatches(k, cluster, globalMicrobatches));
    }
    std::vector<std::vector<PipelineTemplate>> ofWidth;
    std::vector<std::vector<bool>> foundOfWidth(costs.size());
    for (std::size_t w = 0; w < costs.size(); ++w)
        ofWidth.push_back(bestTemplates(costs[w], counts, micro, candidates[w], foundOfWidth[w]));
    for (std::size_t i = 0; i < counts.size(); ++i) {
        PipelineTemplate next;
        bool found = false;
        for (std::size_t w = 0; w < costs.size(); ++w) {
            if (!foundOfWidth[w][i]) continue;
            PipelineTemplate t = std::move(ofWidth[w][i]);
            if (!found || t.pipelineTime(micro[i]) < next.pipelineTime(micro[i])) std::swap(next, t);
            if (found) set.alternatives.push_back(std::move(t));
            found = true;
        }
        if (found) set.maxNodes = counts[i];
        set.templates.push_back(std::move(next));
    }
    set.templates.resize(set.maxNodes - set.minNodes + 1);
    return set;
}

}  // namespace

TemplateSet planTemplates(const ModelProfile& profile, const ClusterSpec& cluster, std::uint32_t f,
                          std::uint64_t globalMicrobatches) {
    return restrictToTolerance(planTemplatesForAnyF(profile, cluster, globalMicrobatches), cluster, f);
}

TemplateSet planTemplatesForAnyF(const ModelProfile& profile, const ClusterSpec& cluster, std::uint64_t globalMicrobatches) {
    return plan(profile, cluster, globalMicrobatches, false);
}

TemplateSet restrictToTolerance(TemplateSet set, const ClusterSpec& cluster, std::uint32_t f) {
    const std::uint32_t n = set.minNodes;
    if (std::uint64_t(f + 1) * n > cluster.nodes)
        throw InputError(fmt::format("fault.f = {} needs f+1 = {} pipelines of at least {} nodes each ({} nodes), but "
                                     "the cluster has {}; with these nodes fault.f can be at most {}",
                                     f, f + 1, n, std::uint64_t(f + 1) * n, cluster.nodes, cluster.nodes / n - 1));
    // The longest pipeline leaves f pipelines of the smallest beside it.
    const std::uint32_t limit = cluster.nodes - f * n;
    while (set.maxNodes > limit || (set.maxNodes > n && set.templates[set.maxNodes - n].nodes == 0)) --set.maxNodes;
    set.templates.resize(set.maxNodes - n + 1);
    std::erase_if(set.alternatives, [&](const PipelineTemplate& t) { return t.nodes > set.maxNodes; });
    return set;
}

std::uint32_t smallestTemplateNodes(const ModelProfile& profile, const ClusterSpec& cluster,
                                    std::uint64_t globalMicrobatches) {
    return plan(profile, cluster, globalMicrobatches, true).minNodes;
}

PipelineTemplate exhaustiveTemplate(const ModelProfile& profile, const ClusterSpec& cluster, std::uint32_t n,
                                    std::uint64_t m, bool& found) {
    const CostModel cost(profile, cluster, std::max<std::uint32_t>(cluster.stageWidth, 1));
    const std::uint32_t L = cost.layers(), S = n * cost.stagesPerNode();
    PipelineTemplate best;
    double bestTime = kInf;
    found = false;
    if (S > L) return best;
    std::vector<std::uint32_t> cuts(S + 1);
    cuts[0] = 0;
    cuts[S] = L;
    // Every choice of S - 1 cut points among L - 1 boundaries.
    std::function<void(std::uint32_t, std::uint32_t)> choose = [&](std::uint32_t k, std::uint32_t from) {
        if (k == S) {
            PipelineTemplate t;
            t.nodes = n;
            t.ranksPerNode = cost.stagesPerNode() * cost.width();
            t.width = cost.width();
            t.referenceMicrobatches = m;
            for (std::uint32_t s = 0; s < S; ++s) {
                const std::uint64_t inFlight = std::min<std::uint64_t>(S - s, m);
                if (!cost.fits(cuts[s], cuts[s + 1], inFlight)) return;
                t.stages.push_back(cost.stage(cuts[s], cuts[s + 1], linkAfter(s, S, cost.stagesPerNode()), inFlight));
            }
            if (t.pipelineTime(m) < bestTime) {
                bestTime = t.pipelineTime(m);
                best = t;
                found = true;
            }
            return;
        }
        for (std::uint32_t c = from; c + (S - k) <= L; ++c) {
            cuts[k] = c;
            choose(k + 1, c + 1);
        }
    };
    choose(1, 1);
    return best;
}

}  // namespace kiln::plan
