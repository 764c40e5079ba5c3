#include "kiln/arch/shard_spec.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace kiln::arch {

UnitRange unitRange(std::int64_t units, std::int64_t parts, std::int64_t index) {
    return {index * units / parts, (index + 1) * units / parts};
}

std::vector<ShardSpec> shardSpecs(const ModelConfig& c, std::uint32_t layer) {
    const std::int64_t V = c.vocabSize, heads = c.heads, hd = c.headDim(), H = c.mlpWidth();
    const ShardSpec whole;
    if (c.llama()) {
        if (layer == 0) return {{0, 1, V, 1}};
        if (layer == c.numLayers() - 1) return {whole, {0, 1, V, 1}};
        const ShardSpec queries{0, 1, heads, hd}, keyValues{0, 1, c.keyValueHeads(), hd}, byHeadColumns{1, 1, heads, hd};
        const ShardSpec neurons{0, 1, H, 1}, neuronColumns{1, 1, H, 1};
        // attention norm, q, k, v, their biases (split with their heads), the q and k norms (whole: one weight
        // for every head, its gradient summed over the stage in the layer), o (rows of the sum), MLP norm, gate,
        // up, down (rows of the sum).
        // A norm over the whole projection (OLMoE's) has a weight per query or key dimension: split with its heads.
        std::vector<ShardSpec> specs = {whole, queries, keyValues, keyValues};
        if (c.qkvBias) specs.insert(specs.end(), {queries, keyValues, keyValues});
        if (c.qkNorm && c.qkNormProjection) specs.insert(specs.end(), {queries, keyValues});
        if (c.qkNorm && !c.qkNormProjection) specs.insert(specs.end(), {whole, whole});
        specs.insert(specs.end(), {byHeadColumns, whole});
        if (!c.experts.any()) {
            specs.insert(specs.end(), {neurons, neurons, neuronColumns});
            return specs;
        }
        // The router whole on every rank (each routes every token alike); the experts split among the ranks, whole
        // experts each (expert parallelism); a shared expert split by neurons as the dense MLP is.
        const ShardSpec experts{0, 1, c.experts.count, 1};
        specs.insert(specs.end(), {whole, experts, experts, experts});
        const std::int64_t S = c.experts.sharedWidth;
        if (S > 0) specs.insert(specs.end(), {{0, 1, S, 1}, {0, 1, S, 1}, {1, 1, S, 1}});
        return specs;
    }
    if (layer == 0) return {{0, 1, V, 1}, whole};  // token rows by vocabulary; positions whole
    if (layer == c.numLayers() - 1) return {whole, whole, {0, 1, V, 1}};  // norm whole; head rows by vocabulary
    const ShardSpec qkv{0, 3, heads, hd}, byHeadColumns{1, 1, heads, hd}, neurons{0, 1, H, 1}, neuronColumns{1, 1, H, 1};
    // ln1, qkv, proj (rows of the sum: bias whole), ln2, fc, out (rows of the sum: bias whole).
    return {whole, whole, qkv, {0, 3, heads, hd}, byHeadColumns, whole, whole, whole, neurons, neurons, neuronColumns, whole};
}

std::vector<std::int64_t> shardShape(std::vector<std::int64_t> shape, const ShardSpec& spec, std::int64_t width,
                                     std::int64_t index) {
    if (!spec.replicated())
        shape[static_cast<std::size_t>(spec.dim)] = spec.groups * unitRange(spec.units, width, index).count() * spec.unitSize;
    return shape;
}

std::uint64_t parametersPerRank(const ModelConfig& config, std::uint32_t layer, std::uint32_t width) {
    const auto shapes = config.parameterShapes(layer);
    const auto specs = shardSpecs(config, layer);
    std::uint64_t total = 0;
    for (std::size_t k = 0; k < shapes.size(); ++k) {
        std::uint64_t n = 1;
        // The last part is the largest (unitRange rounds the first ones down).
        for (auto d : shardShape(shapes[k].second, specs[k], width, width - 1)) n *= static_cast<std::uint64_t>(d);
        total += n;
    }
    return total;
}

std::string widthProblem(const ModelConfig& config, std::uint32_t width) {
    if (width <= 1) return "";
    // Query head i attends with key/value head i / (heads / kv_heads): a rank holds whole groups only when the
    // width divides the key/value heads (replicating them instead would make their gradients partial sums).
    if (config.llama() && config.keyValueHeads() % width != 0)
        return fmt::format("a stage {} ranks wide splits the key/value heads among its ranks, but model.kv_heads = {} "
                           "is not a multiple of {}",
                           width, config.keyValueHeads(), width);
    if (config.experts.any() && config.experts.count % width != 0)
        return fmt::format("a stage {} ranks wide spreads the experts over its ranks, whole experts each, but "
                           "model.experts = {} is not a multiple of {}",
                           width, config.experts.count, width);
    if (config.experts.sharedWidth != 0 && config.experts.sharedWidth < width)
        return fmt::format("a stage {} ranks wide splits the shared expert's neurons among its ranks, but "
                           "model.shared_expert_hidden = {}",
                           width, config.experts.sharedWidth);
    if (config.heads >= width) return "";
    return fmt::format("a stage {} ranks wide splits the attention heads among its ranks, but the model has only {} "
                       "(model.heads)",
                       width, config.heads);
}

}  // namespace kiln::arch
