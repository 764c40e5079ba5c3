// The layout of a run: an instantiation placed on the nodes at hand. Which
// rank runs which stage of which pipeline, which layers it holds, which
// microbatches of the global batch each pipeline takes, and which ranks hold
// each layer (the gradient-sum groups). Ranks are those of the communicator
// the layout was made for (the control communicator).
#pragma once

#include "kiln/plan/instantiation.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::plan {

struct PipelinePlacement {
    std::uint32_t nodes = 0;  // the template
    std::uint32_t width = 1;  // ranks per stage (tensor parallelism)
    std::vector<int> nodeIds;  // the nodes it runs on, in stage order
    std::vector<int> ranks;    // stage s runs on ranks[s * width, (s + 1) * width), slot t on the t-th
    std::vector<std::uint32_t> cuts;  // stage s holds layers [cuts[s], cuts[s + 1])
    std::vector<std::uint32_t> recompute;  // 1: stage s recomputes its layers in full (Stage::recompute)
    std::uint64_t firstMicrobatch = 0, microbatches = 0;  // of the global batch
    double predictedStepTime = 0.0;
    // Patched after failures (PipelineShare::without): the template's nodes and the positions it lost.
    std::uint32_t templateNodes = 0;
    std::vector<std::uint32_t> without;
    // Its share, as an instantiation names it (the template it runs).
    PipelineShare share() const { return {nodes, microbatches, predictedStepTime, width, without, templateNodes}; }
    std::uint32_t stages() const { return static_cast<std::uint32_t>(ranks.size()) / width; }
    std::vector<int> stageRanks(std::uint32_t stage) const {
        return {ranks.begin() + stage * width, ranks.begin() + (stage + 1) * width};
    }
};

// What one rank does.
struct RankRole {
    int pipeline = -1;  // -1: an idle rank (on a node the instantiation leaves idle)
    std::uint32_t stage = 0, stages = 0;
    std::uint32_t firstLayer = 0, endLayer = 0;  // layers [first, end) of the model
    std::uint32_t slot = 0, width = 1;  // this rank's shard of the stage's layers, of `width` (tensor parallelism)
    // The neighbouring stages' ranks in the same slot (a pipeline's stages
    // all have one width); -1 at the ends.
    int previous = -1, next = -1;
    bool recompute = false;  // full activation recomputation on this stage (the planner's Stage::recompute)
    bool idle() const { return pipeline < 0; }
    bool first() const { return stage == 0; }
    bool last() const { return stage + 1 == stages; }
};

// Consecutive layers whose holders are the same ranks: gradients of a
// segment are summed over exactly those ranks, atom by atom where stages are
// split (model/shard_spec.hpp).
struct LayerSegment {
    std::uint32_t firstLayer = 0, endLayer = 0;
    // The holding stage's ranks of each pipeline in turn, in slot order
    // (one per pipeline where no stage is split): holders[0] is pipeline 0's slot 0.
    std::vector<int> holders;
    std::vector<std::uint32_t> widths{};  // widths[p]: how many of `holders` are pipeline p's
    // The rank of each pipeline that holds atom `atom` of `atoms` (atoms a
    // multiple of every width).
    std::vector<int> holdersOfAtom(std::uint32_t atom, std::uint32_t atoms) const;
    // Whether `held(rank)` is true of one of those ranks (without building the list).
    template <typename Held>
    bool anyHolderOfAtom(std::uint32_t atom, std::uint32_t atoms, Held held) const {
        std::size_t first = 0;
        for (std::uint32_t w : widths) {
            if (held(holders.at(first + atom / (atoms / w)))) return true;
            first += w;
        }
        return false;
    }
};

struct Layout {
    std::vector<PipelinePlacement> pipelines;
    std::vector<int> idleNodes;
    std::vector<RankRole> roles;  // by rank
    std::vector<LayerSegment> segments;
    std::uint64_t microBatch = 1, globalBatch = 1;
    std::uint32_t layers = 0;

    // Samples [first, end) of the global batch that microbatch k covers.
    std::uint64_t microbatchBegin(std::uint64_t k) const { return std::min(k * microBatch, globalBatch); }
    std::uint64_t microbatchEnd(std::uint64_t k) const { return std::min((k + 1) * microBatch, globalBatch); }
    // The rank of pipeline 0 that holds `layer`: it writes the layer to checkpoints
    // and counts it in the global gradient norm (every layer exactly once).
    int primaryHolder(std::uint32_t layer) const;
    // The ranks of pipeline 0's stage that holds `layer`, in slot order: the
    // checkpoint writers of its shards.
    std::vector<int> primaryHolders(std::uint32_t layer) const;
    // The finest split of any stage: the least common multiple of the widths.
    std::uint32_t atoms() const;
    // The ranks of `role`'s stage, in slot order (its tensor-parallel group).
    std::vector<int> stageRanks(const RankRole& role) const {
        return pipelines.at(static_cast<std::size_t>(role.pipeline)).stageRanks(role.stage);
    }
    // What `rank` does; idle for a rank beyond `roles` (one of a retiring node).
    RankRole role(int rank) const {
        return rank >= 0 && static_cast<std::size_t>(rank) < roles.size() ? roles[static_cast<std::size_t>(rank)] : RankRole{};
    }
    // "2+1 (4+2 stages)": the pipelines as users write plan.pipelines
    // ("2+1 (2x2+1x2 stages x ranks)" where stages are split).
    std::string describe() const;
};

// The layers one rank holds now: [first, end), empty when first == end.
struct Holding {
    std::uint32_t first = 0, end = 0;
};

// What a regroup keeps in place: for each live node (in the order of
// `ranksOfNode`), the layers each of its ranks holds now, and the bytes of
// each layer (weights and optimizer state: what moving it costs).
struct CurrentHoldings {
    std::vector<std::vector<Holding>> ofNode;
    std::vector<double> layerBytes;
    // The node ids, in stage order, of each of the instantiation's first
    // pipelines that a regroup keeps (Regroup::keptFrom): they stay put; -1
    // for a position a free node fills (greedily, as any other); empty: the
    // whole pipeline placed like any other.
    std::vector<std::vector<int>> keptNodes;
};

// What the nodes hold in `layout` now: oldRanksOfNode[n] are node n's ranks
// in the layout's numbering (-1: a rank the layout did not have, which holds
// nothing), `layerBytes` what moving each layer costs.
CurrentHoldings holdingsOfNodes(const Layout& layout, const std::vector<std::vector<int>>& oldRanksOfNode,
                                std::vector<double> layerBytes);

// `nodes`: the live nodes, each the ascending list of its ranks; every node
// must have `templates`' ranks per node. Ranks on none of them are idle.
// Without `keep`, pipelines take nodes in order, larger pipelines first. With
// `keep`, the kept pipelines stay on their nodes, and each other node position
// goes to the free node that would have to receive the fewest bytes (greedy,
// heaviest positions first): layers stay where they are as far as possible.
Layout placeInstantiation(const TemplateSet& templates, const Instantiation& inst, const std::vector<int>& nodeIds,
                          const std::vector<std::vector<int>>& ranksOfNode, std::uint64_t microBatch,
                          std::uint64_t globalBatch, const CurrentHoldings* keep = nullptr);

// The pipelines as nodes:microbatches, "2:5+1:3": how the log and diag.h5
// name a layout's shares of the batch.
std::string sharesOf(const Instantiation& inst);
std::string sharesOf(const Layout& layout);

// Whether `layout` runs `inst`: the same pipelines (templates) with the same
// microbatches each. An admission regroups only when it does not.
bool runs(const Layout& layout, const Instantiation& inst);

// `layout` on another communicator: rank r becomes newRankOf[r] of `ranks`.
// Every rank with a role must have a new rank (-1 only for idle ones).
Layout renumbered(const Layout& layout, const std::vector<int>& newRankOf, int ranks);

// Bytes the ranks of `layout` must receive given what they hold (`keep`, in
// the order of the nodes the layout was placed on).
double bytesToMove(const Layout& layout, const std::vector<std::vector<int>>& ranksOfNode, const CurrentHoldings& keep);
// The same, node by node: element n is what node n's ranks receive.
std::vector<double> bytesToMoveByNode(const Layout& layout, const std::vector<std::vector<int>>& ranksOfNode,
                                      const CurrentHoldings& keep);

// plan.pipelines ("2+1", "2:5+1:3") as an instantiation, checked against the
// templates, `nodes` and `minPipelines` (fault.f + 1). `origin` names the deck
// line in errors.
Instantiation pinnedInstantiation(const TemplateSet& templates, const std::string& text, std::uint32_t nodes,
                                  std::uint32_t minPipelines, std::uint64_t globalMicrobatches, const std::string& origin);

// Throws InputError naming every stage of `inst` that does not fit in memory
// with the microbatches it will have in flight; `what` names the layout.
void checkStageMemory(const TemplateSet& templates, const Instantiation& inst, const std::string& what);

}  // namespace kiln::plan
