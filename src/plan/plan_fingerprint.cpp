#include "kiln/plan/plan_fingerprint.hpp"

#include <fmt/format.h>

namespace kiln::plan {

base::Fingerprint fingerprintOf(const ModelProfile& profile) {
    base::Fingerprint f("the layer profile the plan is made from");
    f.add("micro_batch", profile.microBatch).add("device", profile.device).add("runtime_bytes", profile.runtimeBytes);
    f.add("layers", profile.layers.size());
    for (std::size_t i = 0; i < profile.layers.size(); ++i) {
        const auto& l = profile.layers[i];
        const auto name = [&](const char* field) { return fmt::format("layers[{}].{}", i, field); };
        f.add(name("kind"), l.kind).add(name("forward_s"), l.forwardSeconds).add(name("backward_s"), l.backwardSeconds);
        f.add(name("optimizer_s"), l.optimizerSeconds).add(name("param_bytes"), l.paramBytes);
        f.add(name("output_bytes"), l.outputBytes).add(name("activation_bytes"), l.activationBytes);
    }
    return f;
}

base::Fingerprint fingerprintOf(const TemplateSet& templates) {
    base::Fingerprint f("the pipeline templates");
    f.add("min_nodes", templates.minNodes).add("max_nodes", templates.maxNodes);
    f.add("memory_per_rank", templates.memoryPerRank);
    const auto addTemplate = [&](const std::string& what, const PipelineTemplate& t) {
        f.add(what + ".nodes", t.nodes).add(what + ".width", t.width).add(what + ".ranks_per_node", t.ranksPerNode);
        f.add(what + ".reference_microbatches", t.referenceMicrobatches);
        for (std::size_t s = 0; s < t.stages.size(); ++s) {
            const auto& st = t.stages[s];
            const std::string stage = fmt::format("{}.stages[{}]", what, s);
            f.add(stage + ".layers", fmt::format("{}-{}", st.firstLayer, st.endLayer));
            f.add(stage + ".time", st.time).add(stage + ".sync", st.sync).add(stage + ".memory", st.memory);
            f.add(stage + ".optimizer", st.optimizer).add(stage + ".recompute", st.recompute);
        }
    };
    for (const auto& t : templates.templates) addTemplate(fmt::format("template[{} nodes]", t.nodes), t);
    for (const auto& t : templates.alternatives) addTemplate(fmt::format("alternative[{} nodes, width {}]", t.nodes, t.width), t);
    return f;
}

base::Fingerprint fingerprintOf(const Instantiation& inst, const std::string& decision) {
    base::Fingerprint f(decision);
    f.add("pipelines", inst.pipelines.size()).add("nodes_used", inst.nodesUsed).add("nodes_idle", inst.nodesIdle);
    for (std::size_t p = 0; p < inst.pipelines.size(); ++p) {
        const auto& share = inst.pipelines[p];
        const std::string name = fmt::format("pipeline[{}]", p);
        f.add(name + ".nodes", share.nodes).add(name + ".width", share.width);
        f.add(name + ".microbatches", share.microbatches).add(name + ".step_time", share.stepTime);
    }
    return f;
}

base::Fingerprint fingerprintOf(const Layout& layout, const std::string& decision) {
    base::Fingerprint f(decision);
    f.add("micro_batch", layout.microBatch).add("global_batch", layout.globalBatch).add("layers", layout.layers);
    f.add("pipelines", layout.pipelines.size()).add("idle_nodes", layout.idleNodes).add("roles", layout.roles.size());
    for (std::size_t p = 0; p < layout.pipelines.size(); ++p) {
        const auto& pl = layout.pipelines[p];
        const std::string name = fmt::format("pipeline[{}]", p);
        f.add(name + ".nodes", pl.nodes).add(name + ".width", pl.width).add(name + ".node_ids", pl.nodeIds);
        f.add(name + ".ranks", pl.ranks).add(name + ".cuts", pl.cuts).add(name + ".recompute", pl.recompute);
        f.add(name + ".first_microbatch", pl.firstMicrobatch).add(name + ".microbatches", pl.microbatches);
    }
    for (std::size_t s = 0; s < layout.segments.size(); ++s) {
        const auto& seg = layout.segments[s];
        const std::string name = fmt::format("segment[{}]", s);
        f.add(name + ".layers", fmt::format("{}-{}", seg.firstLayer, seg.endLayer));
        f.add(name + ".holders", seg.holders).add(name + ".widths", seg.widths);
    }
    return f;
}

}  // namespace kiln::plan
