#include "kiln/plan/layout.hpp"

#include "kiln/base/error.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <numeric>
#include <set>
#include <sstream>
#include <tuple>

namespace kiln::plan {

std::vector<int> LayerSegment::holdersOfAtom(std::uint32_t atom, std::uint32_t atoms) const {
    std::vector<int> out;
    std::size_t first = 0;
    for (std::uint32_t w : widths) {
        out.push_back(holders.at(first + atom / (atoms / w)));
        first += w;
    }
    return out;
}

int Layout::primaryHolder(std::uint32_t layer) const { return primaryHolders(layer).front(); }

std::vector<int> Layout::primaryHolders(std::uint32_t layer) const {
    for (const auto& s : segments)
        if (layer >= s.firstLayer && layer < s.endLayer)
            return {s.holders.begin(), s.holders.begin() + (s.widths.empty() ? 1 : s.widths.front())};
    throw Error(fmt::format("layer {} has no holder in this layout", layer), ErrorScope::AllRanks);
}

std::uint32_t Layout::atoms() const {
    std::uint32_t atoms = 1;
    for (const auto& p : pipelines) atoms = std::lcm(atoms, p.width);
    return atoms;
}

std::string Layout::describe() const {
    std::vector<std::string> nodes, stages;
    bool split = false;
    for (const auto& p : pipelines) {
        nodes.push_back(std::to_string(p.nodes));
        split = split || p.width > 1;
    }
    for (const auto& p : pipelines)
        stages.push_back(split ? fmt::format("{}x{}", p.stages(), p.width) : std::to_string(p.stages()));
    if (split) return fmt::format("{} ({} stages x ranks)", fmt::join(nodes, "+"), fmt::join(stages, "+"));
    const bool one = pipelines.size() == 1 && pipelines[0].stages() == 1;
    return fmt::format("{} ({} stage{})", fmt::join(nodes, "+"), fmt::join(stages, "+"), one ? "" : "s");
}

namespace {

// Bytes of layers [a, b) that a rank holding [c, d) lacks.
double missingBytes(const std::vector<double>& prefix, std::uint32_t a, std::uint32_t b, Holding held) {
    const std::uint32_t lo = std::max(a, held.first), hi = std::min(b, held.end);
    const double overlap = lo < hi ? prefix[hi] - prefix[lo] : 0.0;
    return prefix[b] - prefix[a] - overlap;
}

// The order in which nodes fill the pipelines' node positions (then the idle
// ones). Positions are served heaviest first (most bytes of layers); each
// takes the free node that lacks the fewest bytes of the layers its ranks will
// hold and, among those, the one holding the fewest bytes it does not need
// (a node that holds more is worth more to another position). So a whole
// 1-node replica keeps its place instead of filling a lighter position that
// a spare could fill, and a spare receives only the failed node's layers.
// One pass over positions x nodes: cheap for thousands of nodes.
std::vector<std::size_t> nodeOrder(const TemplateSet& templates, const Instantiation& inst, const CurrentHoldings& keep,
                                   const std::vector<int>& nodeIds) {
    std::vector<double> prefix(1, 0.0);
    for (double b : keep.layerBytes) prefix.push_back(prefix.back() + b);
    struct Position {
        const PipelineTemplate* t;
        std::uint32_t k;  // node position within its pipeline
        double bytes;     // of the layers its ranks hold
    };
    std::vector<Position> positions;
    for (const auto& share : inst.pipelines) {
        const PipelineTemplate* t = share.templateIn(templates);
        const std::uint32_t spn = t->stagesPerNode();
        for (std::uint32_t k = 0; k < share.nodes; ++k)
            positions.push_back({t, k, prefix[t->stages[(k + 1) * spn - 1].endLayer] - prefix[t->stages[k * spn].firstLayer]});
    }
    const std::size_t nodes = keep.ofNode.size();
    std::vector<bool> taken(nodes, false);
    std::vector<std::size_t> nodeAt(positions.size(), nodes);
    // Kept pipelines first, on their own nodes.
    std::vector<bool> pinned(positions.size(), false);
    if (!keep.keptNodes.empty()) {
        // (Node ids are small: an index by id, not a map.)
        const int largest = nodeIds.empty() ? -1 : *std::max_element(nodeIds.begin(), nodeIds.end());
        std::vector<std::size_t> indexOf(static_cast<std::size_t>(largest + 1), nodes);
        for (std::size_t n = 0; n < nodeIds.size(); ++n)
            if (nodeIds[n] >= 0) indexOf[static_cast<std::size_t>(nodeIds[n])] = n;
        std::size_t first = 0;  // the pipeline's first position
        for (std::size_t p = 0; p < inst.pipelines.size(); first += inst.pipelines[p].nodes, ++p) {
            if (p >= keep.keptNodes.size() || keep.keptNodes[p].empty()) continue;
            if (keep.keptNodes[p].size() != inst.pipelines[p].nodes)
                throw Error(fmt::format("kept pipeline {} has {} nodes, its template {}", p, keep.keptNodes[p].size(),
                                        inst.pipelines[p].nodes),
                            ErrorScope::AllRanks);
            for (std::size_t k = 0; k < keep.keptNodes[p].size(); ++k) {
                const int id = keep.keptNodes[p][k];
                if (id < 0) continue;  // a position a free node fills
                const std::size_t at = static_cast<std::size_t>(id) < indexOf.size() ? indexOf[static_cast<std::size_t>(id)] : nodes;
                if (at == nodes || taken[at])
                    throw Error(fmt::format("a kept pipeline's node {} is not a free live node", id), ErrorScope::AllRanks);
                taken[at] = true;
                nodeAt[first + k] = at;
                pinned[first + k] = true;
            }
        }
    }
    std::vector<std::size_t> serve;
    for (std::size_t i = 0; i < positions.size(); ++i)
        if (!pinned[i]) serve.push_back(i);
    std::stable_sort(serve.begin(), serve.end(), [&](auto a, auto b) { return positions[a].bytes > positions[b].bytes; });
    // Nodes that hold the same layers cost the same for every position: the
    // choice is made among groups of them (a few dozen at most), the group's
    // lowest free node taken, which is the node a scan of every node would take.
    // (Grouped by sorting the free nodes by what they hold, then by index: no key is built per node.)
    const auto holdsLess = [&](std::size_t a, std::size_t b) {
        const auto& x = keep.ofNode[a];
        const auto& y = keep.ofNode[b];
        const auto less = [](const Holding& h, const Holding& k) { return std::tie(h.first, h.end) < std::tie(k.first, k.end); };
        return std::lexicographical_compare(x.begin(), x.end(), y.begin(), y.end(), less);
    };
    std::vector<std::size_t> free;
    for (std::size_t n = 0; n < nodes; ++n)
        if (!taken[n]) free.push_back(n);
    std::stable_sort(free.begin(), free.end(), holdsLess);
    std::vector<std::vector<std::size_t>> members;  // each group's nodes, ascending
    for (std::size_t i = 0; i < free.size(); ++i) {
        if (i == 0 || holdsLess(free[i - 1], free[i])) members.emplace_back();
        members.back().push_back(free[i]);
    }
    std::vector<std::size_t> nextFree(members.size(), 0);
    for (std::size_t i : serve) {
        const auto& [t, k, bytes] = positions[i];
        const std::uint32_t g = t->ranksPerNode;
        std::size_t best = nodes, bestGroup = members.size();
        double bestCost = 0.0, bestSurplus = 0.0;
        for (std::size_t group = 0; group < members.size(); ++group) {
            if (nextFree[group] == members[group].size()) continue;
            const std::size_t n = members[group][nextFree[group]];
            double cost = 0.0, surplus = 0.0;
            // (A rank that holds a shard of a layer counts as holding it: an estimate.)
            for (std::uint32_t r = 0; r < g; ++r) {
                const auto& stage = t->stages[k * t->stagesPerNode() + r / t->width];
                const Holding held = r < keep.ofNode[n].size() ? keep.ofNode[n][r] : Holding{};
                cost += missingBytes(prefix, stage.firstLayer, stage.endLayer, held);
                if (held.first < held.end) surplus += missingBytes(prefix, held.first, held.end, {stage.firstLayer, stage.endLayer});
            }
            if (best == nodes || cost < bestCost || (cost == bestCost && (surplus < bestSurplus ||
                                                                          (surplus == bestSurplus && n < best)))) {
                best = n;
                bestGroup = group;
                bestCost = cost;
                bestSurplus = surplus;
            }
        }
        if (best == nodes) break;  // fewer nodes than positions: placeInstantiation reports it
        taken[best] = true;
        ++nextFree[bestGroup];
        nodeAt[i] = best;
    }
    std::vector<std::size_t> order;
    for (std::size_t n : nodeAt)
        if (n < nodes) order.push_back(n);
    for (std::size_t n = 0; n < nodes; ++n)
        if (!taken[n]) order.push_back(n);
    return order;
}

}  // namespace

namespace {
template <typename Pipelines>
std::string sharesText(const Pipelines& pipelines) {
    std::string out;
    for (const auto& p : pipelines) out += fmt::format("{}{}:{}", out.empty() ? "" : "+", p.nodes, p.microbatches);
    return out;
}
}  // namespace

std::string sharesOf(const Instantiation& inst) { return sharesText(inst.pipelines); }
std::string sharesOf(const Layout& layout) { return sharesText(layout.pipelines); }

bool runs(const Layout& layout, const Instantiation& inst) {
    if (layout.pipelines.size() != inst.pipelines.size()) return false;
    for (std::size_t p = 0; p < inst.pipelines.size(); ++p)
        if (layout.pipelines[p].nodes != inst.pipelines[p].nodes ||
            layout.pipelines[p].microbatches != inst.pipelines[p].microbatches ||
            layout.pipelines[p].without != inst.pipelines[p].without)
            return false;
    return true;
}

CurrentHoldings holdingsOfNodes(const Layout& layout, const std::vector<std::vector<int>>& oldRanksOfNode,
                                std::vector<double> layerBytes) {
    CurrentHoldings keep;
    keep.layerBytes = std::move(layerBytes);
    for (const auto& node : oldRanksOfNode) {
        std::vector<Holding> held;
        for (int rank : node) {
            const auto role = layout.role(rank);
            held.push_back(role.idle() ? Holding{} : Holding{role.firstLayer, role.endLayer});
        }
        keep.ofNode.push_back(std::move(held));
    }
    return keep;
}

std::vector<double> bytesToMoveByNode(const Layout& layout, const std::vector<std::vector<int>>& ranksOfNode,
                                      const CurrentHoldings& keep) {
    std::vector<double> prefix(1, 0.0);
    for (double b : keep.layerBytes) prefix.push_back(prefix.back() + b);
    std::vector<double> bytes(ranksOfNode.size(), 0.0);
    for (std::size_t n = 0; n < ranksOfNode.size(); ++n)
        for (std::size_t r = 0; r < ranksOfNode[n].size(); ++r) {
            const RankRole& role = layout.roles[static_cast<std::size_t>(ranksOfNode[n][r])];
            if (role.idle()) continue;
            const Holding held = r < keep.ofNode[n].size() ? keep.ofNode[n][r] : Holding{};
            // A rank of a split stage receives its shard of each layer.
            bytes[n] += missingBytes(prefix, role.firstLayer, role.endLayer, held) / role.width;
        }
    return bytes;
}

double bytesToMove(const Layout& layout, const std::vector<std::vector<int>>& ranksOfNode, const CurrentHoldings& keep) {
    const auto byNode = bytesToMoveByNode(layout, ranksOfNode, keep);
    return std::accumulate(byNode.begin(), byNode.end(), 0.0);
}

Layout placeInstantiation(const TemplateSet& templates, const Instantiation& inst, const std::vector<int>& nodeIdsIn,
                          const std::vector<std::vector<int>>& ranksOfNodeIn, std::uint64_t microBatch,
                          std::uint64_t globalBatch, const CurrentHoldings* keep) {
    // The nodes in the order they fill positions (as given, without holdings to keep).
    std::vector<std::size_t> order(nodeIdsIn.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    if (keep) {
        const auto kept = nodeOrder(templates, inst, *keep, nodeIdsIn);
        std::copy(kept.begin(), kept.end(), order.begin());
    }
    const auto nodeIdAt = [&](std::size_t i) { return nodeIdsIn[order[i]]; };
    const auto ranksAt = [&](std::size_t i) -> const std::vector<int>& { return ranksOfNodeIn[order[i]]; };
    Layout layout;
    layout.microBatch = microBatch;
    layout.globalBatch = globalBatch;
    // Ranks not on these nodes (those of retiring nodes during a recovery) stay idle.
    int ranks = 0;
    for (const auto& node : ranksOfNodeIn)
        for (int r : node) ranks = std::max(ranks, r + 1);
    layout.roles.assign(static_cast<std::size_t>(ranks), RankRole{});
    std::size_t nextNode = 0;
    std::uint64_t nextMicrobatch = 0;
    for (const auto& share : inst.pipelines) {
        const PipelineTemplate* t = share.templateIn(templates);
        if (!t) throw Error(fmt::format("no template for {} nodes", share.nodes), ErrorScope::AllRanks);
        if (nextNode + share.nodes > order.size())
            throw Error(fmt::format("the instantiation needs more than the {} nodes at hand", order.size()),
                        ErrorScope::AllRanks);
        PipelinePlacement p;
        p.nodes = share.nodes;
        p.width = t->width;
        p.firstMicrobatch = nextMicrobatch;
        p.microbatches = share.microbatches;
        p.predictedStepTime = share.stepTime;
        p.templateNodes = share.templateNodes;
        p.without = share.without;
        nextMicrobatch += share.microbatches;
        p.nodeIds.reserve(share.nodes);
        p.ranks.reserve(std::size_t{share.nodes} * t->ranksPerNode);
        for (std::uint32_t k = 0; k < share.nodes; ++k, ++nextNode) {
            const auto& node = ranksAt(nextNode);
            if (node.size() != t->ranksPerNode)
                throw InputError(fmt::format("node {} has {} ranks, but the templates are for {} ranks per node; every "
                                             "node must have the same number of ranks (cluster.ranks_per_node)",
                                             nodeIdAt(nextNode), node.size(), t->ranksPerNode));
            p.nodeIds.push_back(nodeIdAt(nextNode));
            p.ranks.insert(p.ranks.end(), node.begin(), node.end());
        }
        for (const auto& stage : t->stages) {
            p.cuts.push_back(stage.firstLayer);
            p.recompute.push_back(stage.recompute ? 1 : 0);
        }
        p.cuts.push_back(t->stages.back().endLayer);
        layout.layers = p.cuts.back();
        const int index = static_cast<int>(layout.pipelines.size());
        const std::uint32_t S = p.stages(), w = p.width;
        for (std::uint32_t s = 0; s < S; ++s)
            for (std::uint32_t slot = 0; slot < w; ++slot) {
                RankRole& role = layout.roles[static_cast<std::size_t>(p.ranks[s * w + slot])];
                role.pipeline = index;
                role.stage = s;
                role.stages = S;
                role.firstLayer = p.cuts[s];
                role.endLayer = p.cuts[s + 1];
                role.slot = slot;
                role.width = w;
                role.previous = s > 0 ? p.ranks[(s - 1) * w + slot] : -1;
                role.next = s + 1 < S ? p.ranks[(s + 1) * w + slot] : -1;
                role.recompute = p.recompute[s] != 0;
            }
        layout.pipelines.push_back(std::move(p));
    }
    for (; nextNode < order.size(); ++nextNode) layout.idleNodes.push_back(nodeIdAt(nextNode));
    // The segments: cut wherever any pipeline cuts.
    std::set<std::uint32_t> cuts;
    for (const auto& p : layout.pipelines) cuts.insert(p.cuts.begin(), p.cuts.end());
    for (auto it = cuts.begin(); std::next(it) != cuts.end(); ++it) {
        LayerSegment segment{*it, *std::next(it), {}, {}};
        segment.widths.reserve(layout.pipelines.size());
        for (const auto& p : layout.pipelines) {
            const auto s = std::upper_bound(p.cuts.begin(), p.cuts.end(), segment.firstLayer) - p.cuts.begin() - 1;
            const auto stage = p.ranks.begin() + s * p.width;
            segment.holders.insert(segment.holders.end(), stage, stage + p.width);
            segment.widths.push_back(p.width);
        }
        layout.segments.push_back(std::move(segment));
    }
    return layout;
}

Layout renumbered(const Layout& layout, const std::vector<int>& newRankOf, int ranks) {
    const auto to = [&](int rank) {
        if (rank < 0) return -1;
        const int mapped = newRankOf.at(static_cast<std::size_t>(rank));
        if (mapped < 0)
            throw Error(fmt::format("rank {} has a role in the layout but no rank after renumbering", rank),
                        ErrorScope::AllRanks);
        return mapped;
    };
    Layout out = layout;
    out.roles.assign(static_cast<std::size_t>(ranks), RankRole{});
    for (std::size_t r = 0; r < layout.roles.size(); ++r) {
        RankRole role = layout.roles[r];
        if (role.idle()) continue;
        role.previous = to(role.previous);
        role.next = to(role.next);
        out.roles.at(static_cast<std::size_t>(to(static_cast<int>(r)))) = role;
    }
    for (auto& p : out.pipelines)
        for (int& r : p.ranks) r = to(r);
    for (auto& s : out.segments)
        for (int& r : s.holders) r = to(r);
    return out;
}

Instantiation pinnedInstantiation(const TemplateSet& templates, const std::string& text, std::uint32_t nodes,
                                  std::uint32_t minPipelines, std::uint64_t globalMicrobatches, const std::string& origin) {
    Instantiation inst;
    std::string spaced = text;
    std::replace(spaced.begin(), spaced.end(), '+', ' ');
    std::istringstream in(spaced);
    bool shares = false;
    std::uint64_t total = 0;
    std::vector<std::string> problems;
    std::vector<std::string> available;
    for (std::uint32_t n = templates.minNodes; n <= templates.maxNodes; ++n)
        if (templates.forNodes(n)) available.push_back(std::to_string(n));
    for (std::string item; in >> item;) {
        PipelineShare share;
        const auto colon = item.find(':'), w = item.find('w');
        share.nodes = static_cast<std::uint32_t>(std::stoul(item.substr(0, std::min(colon, w))));
        if (w != std::string::npos) share.width = static_cast<std::uint32_t>(std::stoul(item.substr(w + 1, colon - w - 1)));
        if (colon != std::string::npos) {
            shares = true;
            share.microbatches = std::stoull(item.substr(colon + 1));
            total += share.microbatches;
        }
        const PipelineTemplate* best = templates.forNodes(share.nodes);
        if (!best) {
            problems.push_back(fmt::format("there is no {}-node template (this job has templates for {} nodes)", share.nodes,
                                           available.empty() ? std::string("no") : fmt::format("{}", fmt::join(available, ", "))));
        } else if (share.width > 0 && !share.templateIn(templates)) {
            const std::uint32_t g = best->ranksPerNode;
            problems.push_back(
                g % share.width != 0
                    ? fmt::format("'{}': a stage {} ranks wide does not divide a node's {} ranks (cluster.ranks_per_node)",
                                  item, share.width, g)
                    : fmt::format("'{}': no {}-node pipeline of stages {} rank{} wide fits (memory, layers or heads; "
                                  "plan.stage_width may rule the width out too)",
                                  item, share.nodes, share.width, share.width == 1 ? "" : "s"));
        }
        inst.nodesUsed += share.nodes;
        inst.pipelines.push_back(share);
    }
    if (inst.nodesUsed > nodes)
        problems.push_back(fmt::format("the pipelines need {} nodes, the job has {}", inst.nodesUsed, nodes));
    if (inst.pipelines.size() < minPipelines)
        problems.push_back(fmt::format("{} pipeline{} cannot survive fault.f = {} node failures: at least {} are needed",
                                       inst.pipelines.size(), inst.pipelines.size() == 1 ? "" : "s", minPipelines - 1,
                                       minPipelines));
    if (shares && total != globalMicrobatches)
        problems.push_back(fmt::format("the microbatches add up to {}, but a global batch has {} (data.global_batch / "
                                       "train.micro_batch, rounded up)",
                                       total, globalMicrobatches));
    if (!problems.empty())
        throw InputError(fmt::format("{}: plan.pipelines = '{}' cannot run here:\n  {}\n  Change plan.pipelines, or "
                                     "leave it empty for the planner's choice (kiln plan DECK shows it).",
                                     origin, text, fmt::join(problems, "\n  ")));
    inst.nodesIdle = nodes - inst.nodesUsed;
    if (shares) {
        inst.stepTime = 0.0;
        for (auto& share : inst.pipelines) {
            share.stepTime = share.templateIn(templates)->stepTime(share.microbatches);
            inst.stepTime = std::max(inst.stepTime, share.stepTime);
        }
    } else {
        distributeMicrobatches(templates, globalMicrobatches, inst);
    }
    checkStageMemory(templates, inst, fmt::format("{}: plan.pipelines = '{}'", origin, text));
    return inst;
}

void checkStageMemory(const TemplateSet& templates, const Instantiation& inst, const std::string& what) {
    std::vector<std::string> problems;
    for (std::size_t p = 0; p < inst.pipelines.size(); ++p) {
        const auto* t = inst.pipelines[p].templateIn(templates);
        const auto S = static_cast<std::uint64_t>(t->stages.size());
        for (std::uint64_t s = 0; s < S; ++s) {
            const std::uint64_t inFlight = std::min<std::uint64_t>(S - s, inst.pipelines[p].microbatches);
            const double bytes = t->stages[s].memoryWith(inFlight);
            if (bytes > templates.memoryPerRank)
                problems.push_back(fmt::format("pipeline {} ({} nodes), stage {}: {:.2f} GB with {} microbatches in flight",
                                               p, t->nodes, s, bytes / 1e9, inFlight));
        }
    }
    if (!problems.empty())
        throw InputError(fmt::format("{} does not fit in plan.memory_gb = {:.3g} GB per rank:\n  {}\n  Give these "
                                     "pipelines fewer microbatches, more nodes, or more memory per rank.",
                                     what, templates.memoryPerRank / 1e9, fmt::join(problems, "\n  ")));
}

}  // namespace kiln::plan
