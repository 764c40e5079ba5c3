#include "checkpoint_format.hpp"

#include "kiln/base/error.hpp"
#include "kiln/io/hdf5_array.hpp"
#include "kiln/io/parallel_file.hpp"
#include "kiln/train/checkpoint.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace kiln::train::format {

namespace h5 = io::h5;

std::vector<std::pair<std::string, std::uint64_t>> shapeOf(const arch::ModelConfig& c) {
    return {{"model.blocks", c.blocks},
            {"model.d_model", c.dModel},
            {"model.heads", c.heads},
            {"model.mlp_ratio", c.mlpRatio},
            {"the tokenizer's vocabulary", c.vocabSize},
            {"data.seq_len", c.seqLen},
            {"model.family (0 gpt2, 1 llama)", static_cast<std::uint32_t>(c.family)},
            {"model.kv_heads", c.kvHeads},
            {"model.ffn_hidden", c.ffnHidden},
            {"model.tie_embeddings", c.tieEmbeddings ? 1u : 0u},
            {"model.head_dim", c.headDimension},
            {"model.qkv_bias", c.qkvBias ? 1u : 0u},
            {"model.qk_norm", c.qkNorm ? 1u : 0u},
            {"model.qk_norm_over (0 head, 1 projection)", c.qkNormProjection ? 1u : 0u},
            {"model.experts", c.experts.count},
            {"model.experts_per_token", c.experts.perToken},
            {"model.expert_hidden", c.experts.width},
            {"model.shared_expert_hidden", c.experts.sharedWidth}};
}

void writeShape(hid_t file, const arch::ModelConfig& c) {
    for (const auto& [key, value] : shapeOf(c)) h5::writeAttribute(file, attributeName(key), value);
    h5::writeAttribute(file, "model_rope_theta", c.ropeTheta);
    h5::writeAttribute(file, "model_norm_eps", c.normEps);
    // The rotary scaling is not a shape (no tensor depends on it) but the model's maths: export needs it.
    const auto& r = c.rope;
    h5::writeAttribute(file, "model_rope_scaling", static_cast<std::uint64_t>(r.kind));
    h5::writeAttribute(file, "model_rope_factor", r.factor);
    h5::writeAttribute(file, "model_rope_low_freq_factor", r.lowFreqFactor);
    h5::writeAttribute(file, "model_rope_high_freq_factor", r.highFreqFactor);
    h5::writeAttribute(file, "model_rope_original_context", static_cast<std::uint64_t>(r.originalContext));
    h5::writeAttribute(file, "model_rope_beta_fast", r.betaFast);
    h5::writeAttribute(file, "model_rope_beta_slow", r.betaSlow);
    h5::writeAttribute(file, "model_rope_attention_factor", r.attentionFactor);
    h5::writeAttribute(file, "model_sliding_window", static_cast<std::uint64_t>(c.slidingWindow));
    h5::writeAttribute(file, "model_max_positions", static_cast<std::uint64_t>(c.maxPositions));
    h5::writeAttribute(file, "model_hf_architecture", c.hfArchitecture);
    // The routing's maths (export needs the softmax's place) and its losses' weights.
    h5::writeAttribute(file, "model_router_softmax", static_cast<std::uint64_t>(c.experts.softmax));
    h5::writeAttribute(file, "model_router_aux_loss", c.experts.auxLossCoef);
    h5::writeAttribute(file, "model_router_z_loss", c.experts.zLossCoef);
}

arch::ModelConfig readShape(hid_t file, const std::string& context) {
    const auto read = [&](const std::string& key, bool sinceLlama = false) -> std::uint32_t {
        const std::string name = attributeName(key);
        if (sinceLlama && !h5::hasAttribute(file, name)) return 0;
        return static_cast<std::uint32_t>(h5::readUintAttribute(file, name, context));
    };
    arch::ModelConfig c;
    c.blocks = read("model.blocks");
    c.dModel = read("model.d_model");
    c.heads = read("model.heads");
    c.mlpRatio = read("model.mlp_ratio");
    c.vocabSize = read("the tokenizer's vocabulary");
    c.seqLen = read("data.seq_len");
    c.family = read("model.family (0 gpt2, 1 llama)", true) == 1 ? arch::Family::Llama : arch::Family::Gpt2;
    c.kvHeads = read("model.kv_heads", true);
    c.ffnHidden = read("model.ffn_hidden", true);
    c.tieEmbeddings = read("model.tie_embeddings", true) == 1;  // absent before tying: untied
    // Absent before issue 53: d_model / heads, no biases, no q/k norms.
    c.headDimension = read("model.head_dim", true);
    c.qkvBias = read("model.qkv_bias", true) == 1;
    c.qkNorm = read("model.qk_norm", true) == 1;
    // Absent before issue 54: per-head norms, a dense MLP.
    c.qkNormProjection = read("model.qk_norm_over (0 head, 1 projection)", true) == 1;
    c.experts.count = read("model.experts", true);
    c.experts.perToken = read("model.experts_per_token", true);
    c.experts.width = read("model.expert_hidden", true);
    c.experts.sharedWidth = read("model.shared_expert_hidden", true);
    if (h5::hasAttribute(file, "model_router_softmax")) {
        c.experts.softmax = h5::readUintAttribute(file, "model_router_softmax", context) == 1
                                ? arch::Experts::Softmax::BeforeTopK
                                : arch::Experts::Softmax::AfterTopK;
        c.experts.auxLossCoef = h5::readRealAttribute(file, "model_router_aux_loss", context);
        c.experts.zLossCoef = h5::readRealAttribute(file, "model_router_z_loss", context);
    }
    if (h5::hasAttribute(file, "model_rope_theta")) c.ropeTheta = h5::readRealAttribute(file, "model_rope_theta", context);
    if (h5::hasAttribute(file, "model_norm_eps")) c.normEps = h5::readRealAttribute(file, "model_norm_eps", context);
    if (h5::hasAttribute(file, "model_hf_architecture"))  // absent before issue 53: the one the shape implies
        c.hfArchitecture = h5::readStringAttribute(file, "model_hf_architecture", context);
    if (h5::hasAttribute(file, "model_max_positions"))  // absent before issue 65: data.seq_len
        c.maxPositions = static_cast<std::uint32_t>(h5::readUintAttribute(file, "model_max_positions", context));
    if (h5::hasAttribute(file, "model_sliding_window"))  // absent before issue 53: none
        c.slidingWindow = static_cast<std::uint32_t>(h5::readUintAttribute(file, "model_sliding_window", context));
    // Absent before issue 53: unscaled.
    if (h5::hasAttribute(file, "model_rope_scaling")) {
        const auto kind = h5::readUintAttribute(file, "model_rope_scaling", context);
        if (kind > static_cast<std::uint64_t>(arch::RopeScaling::Kind::Yarn))
            throw InputError(fmt::format("{}: model_rope_scaling = {} is no rotary scaling this kiln knows (0-3)", context, kind));
        auto& r = c.rope;
        r.kind = static_cast<arch::RopeScaling::Kind>(kind);
        r.factor = h5::readRealAttribute(file, "model_rope_factor", context);
        r.lowFreqFactor = h5::readRealAttribute(file, "model_rope_low_freq_factor", context);
        r.highFreqFactor = h5::readRealAttribute(file, "model_rope_high_freq_factor", context);
        r.originalContext = static_cast<std::uint32_t>(h5::readUintAttribute(file, "model_rope_original_context", context));
        r.betaFast = h5::readRealAttribute(file, "model_rope_beta_fast", context);
        r.betaSlow = h5::readRealAttribute(file, "model_rope_beta_slow", context);
        r.attentionFactor = h5::readRealAttribute(file, "model_rope_attention_factor", context);
    }
    return c;
}

std::string attributeName(const std::string& key) {
    std::string name = "shape " + key;
    for (auto& ch : name)
        if (ch == ' ' || ch == '.' || ch == '\'') ch = '_';
    return name;
}

std::string layerGroup(std::uint32_t layer) { return fmt::format("/layers/{:05}", layer); }

std::string partsDirectory(const std::string& name) {
    const auto dot = name.rfind(".h5");
    return (dot == std::string::npos ? name : name.substr(0, dot)) + ".parts";
}

h5::Handle openCheckpoint(const std::string& path, std::int64_t& version) {
    h5::Handle file;
    try {
        file = io::openForReading(path, "checkpoint");
    } catch (const InputError& e) {
        throw CheckpointUnreadable(e.what());
    }
    h5::LibraryLock lock(h5::libraryMutex());
    const std::string kind = h5::hasAttribute(file, "format") ? h5::readStringAttribute(file, "format", path) : "";
    if (kind != kName) throw CheckpointUnreadable(fmt::format("{}: not a kiln checkpoint (format '{}')", path, kind));
    version = h5::readIntAttribute(file, "format_version", path);
    if (version != kSingleFile && version != kParts)
        throw InputError(fmt::format("{}: checkpoint format version {}, this kiln reads {} and {}", path, version,
                                     kSingleFile, kParts));
    return file;
}

h5::Handle makeGroup(hid_t parent, const std::string& name, const std::string& context) {
    return h5::createGroup(parent, name, context);
}

void writeTensor(hid_t group, const std::string& name, const std::vector<std::int64_t>& shape, const torch::Tensor& tensor,
                 const std::string& context, bool checksum) {
    const std::vector<std::uint64_t> dims(shape.begin(), shape.end());
    std::uint64_t values = 1;
    for (auto d : dims) values *= d;
    h5::Handle set;
    if (checksum && values > 0) {
        // Chunks of at most 16 Mi values along the first dimension (HDF5 chunks stay below 4 GB).
        std::vector<std::uint64_t> chunk = dims;
        const std::uint64_t row = dims.empty() || dims[0] == 0 ? 1 : values / dims[0];
        if (!chunk.empty()) chunk[0] = std::max<std::uint64_t>(1, std::min<std::uint64_t>(dims[0], (std::uint64_t{16} << 20) / std::max<std::uint64_t>(row, 1)));
        if (chunk.empty()) chunk.push_back(1);
        set = h5::createChecksummedArray(group, name, h5::fileType<float>(), dims, chunk, context);
    } else {
        set = h5::createArray<float>(group, name, dims, context);
    }
    const auto cpu = tensor.detach().to(torch::kCPU, torch::kFloat32).contiguous();
    if (cpu.sizes().vec() != shape)
        throw Error(fmt::format("{}: tensor {} has shape {}, the model config says {}", context, name,
                                fmt::join(cpu.sizes().vec(), "x"), fmt::join(shape, "x")),
                    ErrorScope::ThisRank);
    if (values > 0) h5::writeBlock(set, std::vector<std::uint64_t>(dims.size(), 0), dims, cpu.data_ptr<float>(), context);
}

void writeLayer(hid_t file, const arch::ModelConfig& config, std::uint32_t layer, const std::vector<torch::Tensor>& state,
                const std::string& context, bool checksum) {
    const auto shapes = config.parameterShapes(layer);
    if (state.size() != 3 * shapes.size())
        throw Error(fmt::format("{}: layer {} has {} state tensors, its shapes {}", context, layer, state.size(),
                                3 * shapes.size()),
                    ErrorScope::ThisRank);
    if (!h5::exists(file, "layers")) makeGroup(file, "layers", context);
    h5::Handle group = makeGroup(file, layerGroup(layer), context);
    std::size_t k = 0;
    for (const char* kind : {"params", "adam_m", "adam_v"}) {
        h5::Handle sub = makeGroup(group, kind, context);
        for (const auto& [name, shape] : shapes) writeTensor(sub, name, shape, state[k++], context, checksum);
    }
}

}  // namespace kiln::train::format
