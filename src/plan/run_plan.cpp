#include "kiln/plan/run_plan.hpp"

#include "kiln/base/error.hpp"
#include "kiln/config/deck.hpp"
#include "kiln/plan/layout.hpp"
#include "kiln/plan/plan_fingerprint.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <vector>

namespace kiln::plan {
namespace {

using Clock = std::chrono::steady_clock;

std::string seconds(double s) {
    if (s < 1e-3) return fmt::format("{:.1f} us", 1e6 * s);
    return s < 1.0 ? fmt::format("{:.1f} ms", 1e3 * s) : fmt::format("{:.3f} s", s);
}

}  // namespace

ModelProfile profileFromDeck(const config::Deck& deck, const arch::ModelConfig& model, std::string& source) {
    const std::uint64_t microBatch = static_cast<std::uint64_t>(deck.integer("train.micro_batch"));
    const std::string path = deck.text("plan.profile");
    if (path.empty()) {
        auto profile = syntheticProfile(model, microBatch, deck.real("plan.device_tflops"));
        source = profile.device;
        return profile;
    }
    auto profile = readProfile(path);
    requireSameModel(profile, model, path);
    profile.model.recompute = model.recompute;  // none and full share a profile: the deck's is planned
    if (profile.microBatch != microBatch)
        throw InputError(fmt::format("{}: plan.profile {} was measured with micro-batch {}, but train.micro_batch = {}; "
                                     "profile again with kiln profile DECK",
                                     deck.setting("plan.profile").origin, path, profile.microBatch, microBatch));
    source = path;
    return profile;
}

namespace {

// Templates and instantiation for `plan.f` on `nodes - spares` nodes. Throws InputError.
void planFor(RunPlan& plan, const config::Deck& deck, std::uint32_t nodes, std::uint32_t spares, TemplateCache* cache) {
    plan.spares = spares;
    plan.cluster.nodes = nodes - spares;
    const auto t0 = Clock::now();
    plan.templates = cache ? restrictToTolerance(cache->forAnyF(plan.profile, plan.cluster, plan.globalMicrobatches),
                                                 plan.cluster, plan.f)
                           : planTemplates(plan.profile, plan.cluster, plan.f, plan.globalMicrobatches);
    const auto t1 = Clock::now();
    const std::string pinned = deck.text("plan.pipelines");
    if (!pinned.empty()) {
        plan.pinned = true;
        plan.instantiation = pinnedInstantiation(plan.templates, pinned, plan.cluster.nodes, plan.f + 1,
                                                 plan.globalMicrobatches, deck.setting("plan.pipelines").origin);
    } else {
        plan.instantiation = instantiate(plan.templates, plan.cluster.nodes, plan.f + 1, plan.globalMicrobatches);
        checkStageMemory(plan.templates, plan.instantiation, "the planner's instantiation");
    }
    plan.templateSeconds = std::chrono::duration<double>(t1 - t0).count();
    plan.instantiationSeconds = std::chrono::duration<double>(Clock::now() - t1).count();
}

// Everything the templates are planned from, in words: the profile's
// fingerprint, the model fields the cost model reads, the cluster and the batch.
std::string templateInputs(const ModelProfile& profile, const ClusterSpec& c, std::uint64_t globalMicrobatches) {
    const auto& m = profile.model;
    return fmt::format("{:016x} {} | {} {} {} {} | {} {} {} {:a} {:a} {:a} {:a} {} | {}", fingerprintOf(profile).digest(),
                       m.shapeText(), m.seqLen, m.vocabSize, arch::recomputeName(m.recompute), m.numLayers(), c.nodes,
                       c.ranksPerNode, c.stageWidth, c.memoryPerRank, c.loaderBytesPerRank, c.intraBandwidth,
                       c.interBandwidth, c.stageWidthOrigin, globalMicrobatches);
}

}  // namespace

const TemplateSet& TemplateCache::forAnyF(const ModelProfile& profile, const ClusterSpec& cluster,
                                          std::uint64_t globalMicrobatches) {
    std::string key = templateInputs(profile, cluster, globalMicrobatches);
    for (const auto& e : entries_)
        if (e.key == key) return e.set;
    entries_.push_back({std::move(key), planTemplatesForAnyF(profile, cluster, globalMicrobatches)});
    return entries_.back().set;
}

bool profileMeasuredAtStartUp(const config::Deck& deck) {
    return deck.text("plan.profile").empty() && deck.real("plan.device_tflops") == 0.0;
}

RunPlan planRun(const config::Deck& deck, const arch::ModelConfig& model, const ClusterSpec& cluster, LowerF lower,
                const GivenProfile& given, TemplateCache* cache) {
    RunPlan plan;
    plan.cluster = cluster;
    if (given.profile) {
        plan.profile = *given.profile;
        plan.profileSource = given.source;
    } else if (profileMeasuredAtStartUp(deck)) {
        throw Error("plan.device_tflops = 0 asks for a profile measured at start-up, and none was given", ErrorScope::AllRanks);
    } else {
        plan.profile = profileFromDeck(deck, model, plan.profileSource);
    }
    const auto wantedF = static_cast<std::uint32_t>(deck.integer("fault.f"));
    plan.f = wantedF;
    plan.replanMargin = deck.real("fault.replan_margin");
    plan.microBatch = static_cast<std::uint64_t>(deck.integer("train.micro_batch"));
    const auto global = static_cast<std::uint64_t>(deck.integer("data.global_batch"));
    plan.globalMicrobatches = (global + plan.microBatch - 1) / plan.microBatch;
    // Spares never cost the tolerance: a job with too few nodes gives them up
    // first, then (kiln run, a requeue onto fewer nodes) lowers f down to
    // fault.min_f, as far as the smallest pipeline that fits needs. The
    // smallest fitting pipeline does not depend on f.
    const auto wanted = static_cast<std::uint32_t>(deck.integer("cluster.spare_nodes"));
    std::uint32_t smallest = 1;
    if (lower == LowerF::DownToMinF || wanted > 0)
        smallest = std::max<std::uint32_t>(1, smallestTemplateNodes(plan.profile, cluster, plan.globalMicrobatches));
    if (lower == LowerF::DownToMinF) {
        const auto floor = std::min<std::uint32_t>(wantedF, static_cast<std::uint32_t>(deck.integer("fault.min_f")));
        const std::uint32_t most = cluster.nodes / smallest;  // pipelines the nodes can hold
        if (most >= 1 && wantedF + 1 > most && most - 1 >= floor) {
            plan.f = most - 1;
            plan.faultNote = fmt::format("fault.f = {} lowered to {}: this job's {} node{} cannot hold {} pipelines of this "
                                         "model (each needs at least {} node{}), and fault.min_f = {} allows it",
                                         wantedF, plan.f, cluster.nodes, cluster.nodes == 1 ? "" : "s", wantedF + 1,
                                         smallest, smallest == 1 ? "" : "s", floor);
        }
    }
    const std::uint32_t need = (plan.f + 1) * smallest;
    const std::uint32_t spares = std::min(wanted, cluster.nodes > need ? cluster.nodes - need : 0);
    if (spares < wanted)
        plan.sparesNote = fmt::format("{}: cluster.spare_nodes = {} lowered to {}: {} node{} must first hold fault.f + 1 = {} "
                                      "pipelines",
                                      deck.setting("cluster.spare_nodes").origin, wanted, spares, cluster.nodes,
                                      cluster.nodes == 1 ? "" : "s", plan.f + 1);
    planFor(plan, deck, cluster.nodes, spares, cache);
    return plan;
}

std::string describeStages(const PipelineTemplate& t) {
    std::string out;
    for (std::size_t s = 0; s < t.stages.size(); ++s) {
        const auto& stage = t.stages[s];
        // '|' between stages of one node, '||' where the pipeline goes to the next node.
        if (s > 0) out += s % t.stagesPerNode() == 0 ? " || " : " | ";
        out += stage.endLayer - stage.firstLayer == 1 ? fmt::format("{}", stage.firstLayer)
                                                      : fmt::format("{}-{}", stage.firstLayer, stage.endLayer - 1);
        if (stage.recompute) out += "*";
    }
    return out;
}

std::string describeTemplates(const RunPlan& plan, bool all) {
    const auto& set = plan.templates;
    std::string out = fmt::format("templates for {}..{} nodes (f = {}), {} rank{} per node, planned in {:.3f} s:\n",
                                  set.minNodes, set.maxNodes, plan.f, plan.cluster.ranksPerNode,
                                  plan.cluster.ranksPerNode == 1 ? "" : "s", plan.templateSeconds);
    out += fmt::format("  {:>5} {:>6} {:>5} {:>13} {:>11} {:>12} {:>12} {:>10}  layers per stage (| next stage, || next node, * recomputed)\n",
                       "nodes", "stages", "width", "microbatches", "bottleneck", "fill+drain", "step time", "memory");
    const std::size_t count = set.templates.size();
    for (std::size_t i = 0; i < count; ++i) {
        if (!all && count > 12 && i >= 6 && i + 6 < count) {
            if (i == 6) out += fmt::format("  ... ({} more; --all prints them)\n", count - 12);
            continue;
        }
        const auto& t = set.templates[i];
        if (t.nodes == 0) {
            out += fmt::format("  {:>5}  no pipeline of this length fits in memory\n", set.minNodes + i);
            continue;
        }
        double memory = 0.0;
        for (const auto& stage : t.stages) memory = std::max(memory, stage.memory);
        out += fmt::format("  {:>5} {:>6} {:>5} {:>13} {:>11} {:>12} {:>12} {:>7.3g} GB  {}\n", t.nodes, t.stages.size(),
                           t.width, t.referenceMicrobatches, seconds(t.bottleneck()), seconds(t.latency()),
                           seconds(t.stepTime(t.referenceMicrobatches)), memory / 1e9, describeStages(t));
    }
    return out;
}

std::string describeInstantiation(const TemplateSet& set, const Instantiation& inst, std::uint64_t microBatch) {
    std::uint64_t microbatches = 0;
    for (const auto& p : inst.pipelines) microbatches += p.microbatches;
    std::string out = fmt::format("  {} pipeline{} on {} node{} ({} idle); predicted step {}; {:.1f} samples/s\n",
                                  inst.pipelines.size(), inst.pipelines.size() == 1 ? "" : "s", inst.nodesUsed,
                                  inst.nodesUsed == 1 ? "" : "s", inst.nodesIdle, seconds(inst.stepTime),
                                  double(microbatches * microBatch) / inst.stepTime);
    out += fmt::format("  {:>8} {:>6} {:>7} {:>5} {:>13} {:>12}\n", "pipeline", "nodes", "stages", "width", "microbatches",
                       "step time");
    for (std::size_t p = 0; p < inst.pipelines.size(); ++p) {
        const auto* t = inst.pipelines[p].templateIn(set);
        out += fmt::format("  {:>8} {:>6} {:>7} {:>5} {:>13} {:>12}\n", p, inst.pipelines[p].nodes, t ? t->stages.size() : 0,
                           t ? t->width : 0, inst.pipelines[p].microbatches, seconds(inst.pipelines[p].stepTime));
    }
    // Why a pipeline can get no work: the distribution gives each microbatch to the pipeline that
    // finishes it first, and a slow one may never be first; it still holds a replica of every layer.
    for (std::size_t p = 0; p < inst.pipelines.size(); ++p)
        if (inst.pipelines[p].microbatches == 0)
            out += fmt::format("  pipeline {} is a standby replica (0 microbatches): with any microbatch it would end the "
                               "step later than the others; it is kept for the f+1 copies of every layer, and takes "
                               "work when a failure or a regroup changes the pipelines\n",
                               p);
    return out;
}

}  // namespace kiln::plan
