// How a tensor-parallel stage divides each parameter of a layer among its
// ranks (Megatron-LM's split, no torch here: the planner's memory model and
// the checks use it too).
//
// A split parameter is cut along one dimension into `units` equal units
// (rows of the vocabulary, attention heads, MLP neurons); rank t of a stage
// of width w holds units [t U / w, (t + 1) U / w) of every group (QKV has
// three groups: the queries, keys and values of the same heads). Any
// replicated parameter (norms, biases added after a sum, positions) is held
// whole by every rank of the stage.
//
// The same cut at the finest width G (a node's ranks) gives the layer's
// "atoms": atom j is units [j U / G, (j + 1) U / G). A shard of any width
// dividing G is a run of whole atoms, so replicas that split a layer
// differently still agree on atoms: gradients are summed atom by atom, and
// migration moves atoms.
#pragma once

#include "kiln/arch/model_config.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::arch {

struct ShardSpec {
    int dim = -1;                // the split dimension; -1: replicated
    std::int64_t groups = 1;     // consecutive blocks of the dimension split alike
    std::int64_t units = 1;      // units per group
    std::int64_t unitSize = 1;   // elements of the dimension per unit
    bool replicated() const { return dim < 0; }
};

// Units [first, end).
struct UnitRange {
    std::int64_t first = 0, end = 0;
    std::int64_t count() const { return end - first; }
};

// Part `index` of `parts` of `units` units (the first ones one unit shorter when uneven).
UnitRange unitRange(std::int64_t units, std::int64_t parts, std::int64_t index);

// The specs of layer `layer`'s parameters, in parameterShapes() order.
std::vector<ShardSpec> shardSpecs(const ModelConfig& config, std::uint32_t layer);

// The shape rank `index` of a stage of width `width` holds of a parameter of `fullShape`.
std::vector<std::int64_t> shardShape(std::vector<std::int64_t> fullShape, const ShardSpec& spec, std::int64_t width,
                                     std::int64_t index);

// Parameters of layer `layer` that a rank of a stage of width `width`
// holds (the largest shard: planning is for the rank that holds most).
std::uint64_t parametersPerRank(const ModelConfig& config, std::uint32_t layer, std::uint32_t width);

// Why a stage of `width` ranks cannot split this model ("" when it can):
// every rank needs at least one attention head.
std::string widthProblem(const ModelConfig& config, std::uint32_t width);

}  // namespace kiln::arch
