#include "kiln/plan/layer_profile.hpp"

#include "kiln/base/error.hpp"
#include "kiln/io/atomic_file.hpp"
#include "kiln/io/hdf5.hpp"
#include "kiln/io/hdf5_array.hpp"
#include "kiln/io/hdf5_record.hpp"
#include "kiln/io/parallel_file.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstring>

namespace kiln::plan {

namespace h5 = io::h5;

namespace {

struct Row {
    char kind[16];
    double forward, backward;
    std::uint64_t paramBytes, outputBytes, activationBytes;
    double optimizer;  // absent from format 1 files: read as 0
};

const h5::Record<Row>& rowRecord() {
    static const auto record = h5::Record<Row>()
                                   .field("kind", &Row::kind)
                                   .field("forward_s", &Row::forward)
                                   .field("backward_s", &Row::backward)
                                   .field("param_bytes", &Row::paramBytes)
                                   .field("optimizer_s", &Row::optimizer)
                                   .field("output_bytes", &Row::outputBytes)
                                   .field("activation_bytes", &Row::activationBytes);
    return record;
}

const std::vector<std::pair<const char*, std::uint32_t arch::ModelConfig::*>> kShape = {
    {"model_blocks", &arch::ModelConfig::blocks},       {"model_d_model", &arch::ModelConfig::dModel},
    {"model_heads", &arch::ModelConfig::heads},         {"model_mlp_ratio", &arch::ModelConfig::mlpRatio},
    {"model_vocab", &arch::ModelConfig::vocabSize},     {"model_seq_len", &arch::ModelConfig::seqLen}};
// The llama family's shape: absent from profiles written before it existed (which are gpt2's: 0).
const std::vector<std::pair<const char*, std::uint32_t arch::ModelConfig::*>> kLlamaShape = {
    {"model_kv_heads", &arch::ModelConfig::kvHeads}, {"model_ffn_hidden", &arch::ModelConfig::ffnHidden},
    {"model_head_dim", &arch::ModelConfig::headDimension}};
// Its switches (Qwen's): absent from profiles written before them, which had none.
const std::vector<std::pair<const char*, bool arch::ModelConfig::*>> kLlamaFeatures = {
    {"model_qkv_bias", &arch::ModelConfig::qkvBias}, {"model_qk_norm", &arch::ModelConfig::qkNorm}};

// A mixture of experts' shape (and OLMoE's norms): absent from profiles written before them, which had none.
using Field = std::uint32_t& (*)(arch::ModelConfig&);
const std::vector<std::pair<const char*, Field>> kExpertShape = {
    {"model_experts", [](arch::ModelConfig& c) -> std::uint32_t& { return c.experts.count; }},
    {"model_experts_per_token", [](arch::ModelConfig& c) -> std::uint32_t& { return c.experts.perToken; }},
    {"model_expert_hidden", [](arch::ModelConfig& c) -> std::uint32_t& { return c.experts.width; }},
    {"model_shared_expert_hidden", [](arch::ModelConfig& c) -> std::uint32_t& { return c.experts.sharedWidth; }}};

}  // namespace

namespace {

// Values a block keeps for backward per token (fp32 elements), without attention's T x T scores.
double blockValuesPerToken(const arch::ModelConfig& c) {
    const double C = c.dModel, H = c.mlpWidth();
    // gpt2: ln1 in, qkv out (3C), attended (C), proj in, ln2 in, fc out (H), gelu out (H).
    if (!c.llama()) return 7 * C + 2 * H;
    const double kv = double(c.keyValueHeads()) * c.headDim(), Q = c.queryWidth();
    // llama: norm in and out, q k v, q and k normed (qk_norm), q and k rotated, k and v repeated to every query
    // head (when grouped), attended, residual, MLP norm in and out, gate, up, silu(gate) and the product.
    const double repeated = c.keyValueHeads() < c.heads ? 2 * Q : 0.0, normed = c.qkNorm ? Q + kv : 0.0;
    const double attention = 2 * C + (Q + 2 * kv) + normed + (Q + kv) + repeated + Q + C;
    if (!c.experts.any()) return attention + 2 * C + 4 * H;
    // A mixture: the MLP norm in and out, the router's scores and probabilities (E each), and per choice the
    // token gathered (C), gate, up, silu(gate), their product (4 He each) and the weighted output (C) kept for
    // backward; the shared expert as a dense MLP.
    const auto& e = c.experts;
    return attention + 2 * C + 2.0 * e.count + double(e.perToken) * (2 * C + 4.0 * e.width) + 4.0 * e.sharedWidth;
}

// Attention's values kept per sample: written out (libtorch 1.13), the scores and probabilities, 2 x heads x T x T;
// fused (libtorch 2's scaled_dot_product_attention), the output and one log-sum-exp per head and position.
double attentionValuesPerSample(const arch::ModelConfig& c) {
    const double T = c.seqLen;
#if KILN_FUSED_ATTENTION
    return double(c.heads) * T;
#else
    return 2.0 * c.heads * T * T;
#endif
}

}  // namespace

std::uint64_t activationBytesEstimate(const arch::ModelConfig& c, std::uint32_t layer, std::uint64_t microBatch) {
    const std::uint64_t BT = microBatch * c.seqLen, C = c.dModel;
    if (layer == 0) return 4 * BT * C;
    if (layer == c.numLayers() - 1) return 4 * (BT * C * 2 + 2 * BT * c.vocabSize);  // norm input/output, logits, softmax
    // Selective recomputation keeps nothing of attention's inside (its q, k and v are the block's already).
    const double attention = c.recompute == arch::ModelConfig::Recompute::Selective ? 0.0 : attentionValuesPerSample(c);
    return static_cast<std::uint64_t>(4.0 * (double(BT) * blockValuesPerToken(c) + double(microBatch) * attention));
}

double splitActivationShare(const arch::ModelConfig& c, std::uint32_t layer) {
    if (layer == 0) return 0.0;  // the embedding's output is whole on every rank of a stage
    const double BT = c.seqLen, C = c.dModel, V = c.vocabSize;
    if (layer == c.numLayers() - 1) return 2 * BT * V / (BT * C * 2 + 2 * BT * V);  // the logits and softmax are split
    // All but the two norms' inputs are split (heads or neurons).
    const double all = BT * blockValuesPerToken(c) + attentionValuesPerSample(c);
    return (all - 2 * BT * C) / all;
}

ModelProfile syntheticProfile(const arch::ModelConfig& c, std::uint64_t microBatch, double tflops) {
    ModelProfile p{c, microBatch, fmt::format("synthetic {} TFLOP/s", tflops), {}};
    const double tokens = double(microBatch) * c.seqLen;
    for (std::uint32_t i = 0; i < c.numLayers(); ++i) {
        const char* kind = i == 0 ? "embedding" : i + 1 == c.numLayers() ? "output" : "block";
        // The embedding is a lookup: give it a token cost so that no layer is free.
        const double forward = std::max(c.forwardFlopsPerToken(i), 2.0 * c.dModel) * tokens / (tflops * 1e12);
        // Selective recomputation runs attention's core (q k^T and the weighted sum of v) again in backward.
        const bool selective = c.recompute == arch::ModelConfig::Recompute::Selective && kind == std::string("block");
        const double attentionWidth = c.llama() ? c.queryWidth() : c.dModel;
        const double recomputed = selective ? 4.0 * c.seqLen * attentionWidth * tokens / (tflops * 1e12) : 0.0;
        const std::uint64_t output = static_cast<std::uint64_t>(tokens) * 4 * (i + 1 == c.numLayers() ? c.vocabSize : c.dModel);
        p.layers.push_back({kind, forward, 2.0 * forward + recomputed, 4 * c.parametersOf(i), output,
                            activationBytesEstimate(c, i, microBatch)});
    }
    return p;
}

void requireSameModel(const ModelProfile& p, const arch::ModelConfig& c, const std::string& path) {
    std::vector<std::string> differences;
    for (const auto& [name, member] : kShape)
        if (p.model.*member != c.*member)
            differences.push_back(fmt::format("{} is {} in the profile but {} in the deck",
                                              std::string(name).replace(5, 1, "."), p.model.*member, c.*member));
    if (p.model.family != c.family)
        differences.push_back(fmt::format("model.family is {} in the profile but {} in the deck",
                                          arch::familyName(p.model.family), arch::familyName(c.family)));
    for (const auto& [name, member] : kLlamaShape)
        if (c.llama() && p.model.*member != c.*member)
            differences.push_back(fmt::format("{} is {} in the profile but {} in the deck",
                                              std::string(name).replace(5, 1, "."), p.model.*member, c.*member));
    arch::ModelConfig profiledModel = p.model, deckModel = c;
    for (const auto& [name, field] : kExpertShape) {
        const auto profiled = field(profiledModel), deck = field(deckModel);
        if (profiled != deck)
            differences.push_back(fmt::format("{} is {} in the profile but {} in the deck",
                                              std::string(name).replace(5, 1, "."), profiled, deck));
    }
    for (const auto& [name, member] : kLlamaFeatures)
        if (c.llama() && p.model.*member != c.*member)
            differences.push_back(fmt::format("{} is {} in the profile but {} in the deck", std::string(name).replace(5, 1, "."),
                                              p.model.*member, c.*member));
    // A profile measured with selective recomputation holds other activations and backward times; none and
    // full measure the same layers (full's recomputation is the cost model's).
    const auto selective = [](const arch::ModelConfig& m) { return m.recompute == arch::ModelConfig::Recompute::Selective; };
    if (selective(p.model) != selective(c))
        differences.push_back(fmt::format("train.recompute is {} in the profile but {} in the deck",
                                          arch::recomputeName(p.model.recompute), arch::recomputeName(c.recompute)));
    if (!differences.empty())
        throw InputError(fmt::format("{} profiles another model:\n  {}\n  Profile this one with kiln profile DECK, or "
                                     "leave plan.profile empty for a synthetic profile",
                                     path, fmt::join(differences, "\n  ")));
}

void writeProfile(const std::string& path, const ModelProfile& p) {
    h5::LibraryLock lock(h5::libraryMutex());
    h5::quietErrors();
    const std::string temporary = io::temporarySibling(path).string();
    {
        h5::Handle file = h5::createFile(temporary, path);
        h5::writeAttribute(file, "format", std::string("kiln-layer-profile"));
        h5::writeAttribute(file, "format_version", std::int64_t{1});
        h5::writeAttribute(file, "device", p.device);
        h5::writeAttribute(file, "micro_batch", p.microBatch);
        for (const auto& [name, member] : kShape) h5::writeAttribute(file, name, std::uint64_t{p.model.*member});
        h5::writeAttribute(file, "model_family", std::uint64_t{static_cast<std::uint32_t>(p.model.family)});
        for (const auto& [name, member] : kLlamaShape) h5::writeAttribute(file, name, std::uint64_t{p.model.*member});
        for (const auto& [name, member] : kLlamaFeatures) h5::writeAttribute(file, name, std::uint64_t{p.model.*member});
        arch::ModelConfig model = p.model;
        for (const auto& [name, field] : kExpertShape) h5::writeAttribute(file, name, std::uint64_t{field(model)});
        h5::writeAttribute(file, "model_qk_norm_projection", std::uint64_t{model.qkNormProjection});
        h5::writeAttribute(file, "runtime_bytes", p.runtimeBytes);
        h5::writeAttribute(file, "recompute", std::string(arch::recomputeName(p.model.recompute)));
        std::vector<Row> rows;
        for (const auto& l : p.layers) {
            Row r{};
            std::strncpy(r.kind, l.kind.c_str(), sizeof(r.kind) - 1);
            r.forward = l.forwardSeconds;
            r.backward = l.backwardSeconds;
            r.paramBytes = l.paramBytes;
            r.outputBytes = l.outputBytes;
            r.activationBytes = l.activationBytes;
            r.optimizer = l.optimizerSeconds;
            rows.push_back(r);
        }
        h5::writeRecords(file, "layers", rowRecord(), rows, path);
    }
    io::commitTemporary(temporary, path);
}

ModelProfile readProfile(const std::string& path) {
    h5::Handle file = io::openForReading(path, "layer profile");
    h5::LibraryLock lock(h5::libraryMutex());
    if (!h5::hasAttribute(file, "format") || h5::readStringAttribute(file, "format", path) != "kiln-layer-profile")
        throw InputError(fmt::format("{}: not a kiln layer profile (write one with kiln profile DECK)", path));
    ModelProfile p;
    p.device = h5::readStringAttribute(file, "device", path);
    p.microBatch = h5::readUintAttribute(file, "micro_batch", path);
    for (const auto& [name, member] : kShape) p.model.*member = static_cast<std::uint32_t>(h5::readUintAttribute(file, name, path));
    if (h5::hasAttribute(file, "model_family"))
        p.model.family = h5::readUintAttribute(file, "model_family", path) == 1 ? arch::Family::Llama : arch::Family::Gpt2;
    for (const auto& [name, member] : kLlamaShape)
        if (h5::hasAttribute(file, name)) p.model.*member = static_cast<std::uint32_t>(h5::readUintAttribute(file, name, path));
    for (const auto& [name, member] : kLlamaFeatures)
        if (h5::hasAttribute(file, name)) p.model.*member = h5::readUintAttribute(file, name, path) != 0;
    for (const auto& [name, field] : kExpertShape)
        if (h5::hasAttribute(file, name)) field(p.model) = static_cast<std::uint32_t>(h5::readUintAttribute(file, name, path));
    if (h5::hasAttribute(file, "model_qk_norm_projection"))
        p.model.qkNormProjection = h5::readUintAttribute(file, "model_qk_norm_projection", path) != 0;
    // Absent from profiles written before it was measured: nothing counted.
    if (h5::hasAttribute(file, "runtime_bytes")) p.runtimeBytes = h5::readUintAttribute(file, "runtime_bytes", path);
    // Absent from profiles written before train.recompute: measured without.
    if (h5::hasAttribute(file, "recompute"))
        p.model.recompute = arch::recomputeFromName(h5::readStringAttribute(file, "recompute", path));
    for (const auto& r : h5::readRecords<Row>(file, "layers", rowRecord(), path))
        p.layers.push_back({std::string(r.kind, strnlen(r.kind, sizeof(r.kind))), r.forward, r.backward, r.paramBytes,
                            r.outputBytes, r.activationBytes, r.optimizer});
    if (p.layers.size() != p.model.numLayers())
        throw InputError(fmt::format("{}: {} layer records for a model of {} layers", path, p.layers.size(), p.model.numLayers()));
    return p;
}

}  // namespace kiln::plan
