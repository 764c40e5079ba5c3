#include "kiln/plan/layout_packing.hpp"

namespace kiln::plan {

void packLayout(const Layout& layout, RowWriter& out) {
    out.put(layout.pipelines.size());
    for (const auto& p : layout.pipelines) {
        out.put(p.nodes);
        out.put(p.width);
        out.putAll(p.nodeIds);
        out.putAll(p.ranks);
        out.putAll(p.cuts);
        out.putAll(p.recompute);
        out.put(p.firstMicrobatch);
        out.put(p.microbatches);
        out.putReal(p.predictedStepTime);
        out.put(p.templateNodes);
        out.putAll(p.without);
    }
    out.putAll(layout.idleNodes);
    out.put(layout.roles.size());
    for (const auto& r : layout.roles) {
        out.put(r.pipeline);
        out.put(r.stage);
        out.put(r.stages);
        out.put(r.firstLayer);
        out.put(r.endLayer);
        out.put(r.slot);
        out.put(r.width);
        out.put(r.previous);
        out.put(r.next);
        out.put(r.recompute ? 1 : 0);
    }
    out.put(layout.segments.size());
    for (const auto& s : layout.segments) {
        out.put(s.firstLayer);
        out.put(s.endLayer);
        out.putAll(s.holders);
        out.putAll(s.widths);
    }
    out.put(layout.microBatch);
    out.put(layout.globalBatch);
    out.put(layout.layers);
}

Layout unpackLayout(RowReader& in) {
    Layout layout;
    layout.pipelines.resize(in.get<std::size_t>());
    for (auto& p : layout.pipelines) {
        p.nodes = in.get<std::uint32_t>();
        p.width = in.get<std::uint32_t>();
        p.nodeIds = in.getAll<int>();
        p.ranks = in.getAll<int>();
        p.cuts = in.getAll<std::uint32_t>();
        p.recompute = in.getAll<std::uint32_t>();
        p.firstMicrobatch = in.get<std::uint64_t>();
        p.microbatches = in.get<std::uint64_t>();
        p.predictedStepTime = in.getReal();
        p.templateNodes = in.get<std::uint32_t>();
        p.without = in.getAll<std::uint32_t>();
    }
    layout.idleNodes = in.getAll<int>();
    layout.roles.resize(in.get<std::size_t>());
    for (auto& r : layout.roles) {
        r.pipeline = in.get<int>();
        r.stage = in.get<std::uint32_t>();
        r.stages = in.get<std::uint32_t>();
        r.firstLayer = in.get<std::uint32_t>();
        r.endLayer = in.get<std::uint32_t>();
        r.slot = in.get<std::uint32_t>();
        r.width = in.get<std::uint32_t>();
        r.previous = in.get<int>();
        r.next = in.get<int>();
        r.recompute = in.get<int>() != 0;
    }
    layout.segments.resize(in.get<std::size_t>());
    for (auto& s : layout.segments) {
        s.firstLayer = in.get<std::uint32_t>();
        s.endLayer = in.get<std::uint32_t>();
        s.holders = in.getAll<int>();
        s.widths = in.getAll<std::uint32_t>();
    }
    layout.microBatch = in.get<std::uint64_t>();
    layout.globalBatch = in.get<std::uint64_t>();
    layout.layers = in.get<std::uint32_t>();
    return layout;
}

}  // namespace kiln::plan
