#include "kiln/train/hf_import.hpp"

#include "hf_names.hpp"
#include "kiln/base/error.hpp"
#include "kiln/arch/hf_families.hpp"
#include "kiln/arch/shard_spec.hpp"
#include "kiln/model/tensor_parallel.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <map>

namespace kiln::train {
namespace {

using nlohmann::json;

json readJson(const std::filesystem::path& path) {
    std::ifstream in(path);
    if (!in) throw InputError(fmt::format("{}: cannot open (a Hugging Face model directory holds config.json and "
                                          "model.safetensors or model.safetensors.index.json)",
                                          path.string()));
    try {
        return json::parse(in);
    } catch (const json::exception& e) {
        throw InputError(fmt::format("{}: not valid JSON ({})", path.string(), e.what()));
    }
}

// Field `key` of config.json: its value, `fallback` when absent or null.
template <typename T>
T field(const json& config, const char* key, T fallback) {
    const auto it = config.find(key);
    return it == config.end() || it->is_null() ? fallback : it->get<T>();
}

template <typename T>
T required(const json& config, const char* key, const std::filesystem::path& path) {
    const auto it = config.find(key);
    if (it == config.end() || it->is_null())
        throw InputError(fmt::format("{}: field '{}' is missing", path.string(), key));
    return it->get<T>();
}

// The tensors of a directory's safetensors files: where each one's bytes are.
class SafetensorsDirectory {
public:
    explicit SafetensorsDirectory(const std::filesystem::path& dir) {
        const auto single = dir / "model.safetensors", index = dir / "model.safetensors.index.json";
        if (std::filesystem::exists(index)) {
            const json listing = readJson(index);  // held: items() below views it
            std::map<std::string, bool> files;
            for (const auto& [name, file] : listing.at("weight_map").items()) files[file.get<std::string>()] = true;
            for (const auto& [file, unused] : files) addFile(dir / file);
        } else if (std::filesystem::exists(single)) {
            addFile(single);
        } else {
            throw InputError(fmt::format("{}: neither model.safetensors nor model.safetensors.index.json (kiln reads "
                                         "safetensors; convert a pytorch_model.bin with transformers' save_pretrained)",
                                         dir.string()));
        }
    }
    bool has(const std::string& name) const { return tensors_.count(name) > 0; }
    // Tensor `name` as float32.
    torch::Tensor read(const std::string& name) const {
        const auto& t = tensors_.at(name);
        std::ifstream in(t.file, std::ios::binary);
        in.seekg(static_cast<std::streamoff>(t.offset));
        std::vector<char> bytes(t.bytes);
        in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
        if (!in) throw InputError(fmt::format("{}: tensor {} is truncated", t.file.string(), name), ErrorScope::ThisRank);
        return torch::from_blob(bytes.data(), t.shape, t.dtype).to(torch::kFloat32).clone();
    }
    std::vector<std::int64_t> shape(const std::string& name) const { return tensors_.at(name).shape; }
    std::string fileOf(const std::string& name) const { return tensors_.at(name).file.string(); }

private:
    struct Entry {
        std::filesystem::path file;
        torch::Dtype dtype;
        std::vector<std::int64_t> shape;
        std::uint64_t offset = 0, bytes = 0;
    };
    void addFile(const std::filesystem::path& file) {
        std::ifstream in(file, std::ios::binary);
        unsigned char le[8] = {};
        if (!in.read(reinterpret_cast<char*>(le), 8)) throw InputError(fmt::format("{}: not a safetensors file", file.string()));
        std::uint64_t length = 0;
        for (int k = 0; k < 8; ++k) length |= std::uint64_t{le[k]} << (8 * k);
        if (length > (std::uint64_t{1} << 30)) throw InputError(fmt::format("{}: not a safetensors file", file.string()));
        std::string text(length, '\0');
        if (!in.read(text.data(), static_cast<std::streamsize>(length)))
            throw InputError(fmt::format("{}: its header is truncated", file.string()));
        json header;
        try {
            header = json::parse(text);
        } catch (const json::exception& e) {
            throw InputError(fmt::format("{}: its header is not valid JSON ({})", file.string(), e.what()));
        }
        const std::map<std::string, std::pair<torch::Dtype, std::size_t>> dtypes = {
            {"F32", {torch::kFloat32, 4}}, {"BF16", {torch::kBFloat16, 2}}, {"F16", {torch::kFloat16, 2}}};
        for (const auto& [name, info] : header.items()) {
            if (name == "__metadata__") continue;
            const auto type = dtypes.find(info.at("dtype").get<std::string>());
            if (type == dtypes.end())
                throw InputError(fmt::format("{}: tensor {} is {}; kiln reads F32, BF16 and F16", file.string(), name,
                                             info.at("dtype").get<std::string>()));
            Entry e{file, type->second.first, info.at("shape").get<std::vector<std::int64_t>>(), 0, 0};
            const auto offsets = info.at("data_offsets").get<std::vector<std::uint64_t>>();
            e.offset = 8 + length + offsets.at(0);
            e.bytes = offsets.at(1) - offsets.at(0);
            std::uint64_t elements = 1;
            for (auto d : e.shape) elements *= static_cast<std::uint64_t>(d);
            if (elements * type->second.second != e.bytes)
                throw InputError(fmt::format("{}: tensor {} holds {} bytes for shape [{}]", file.string(), name, e.bytes,
                                             fmt::join(e.shape, ", ")));
            tensors_[name] = std::move(e);
        }
    }
    std::map<std::string, Entry> tensors_;
};

// A name as the checkpoint spells it: GPT-2's published checkpoints drop the "transformer." prefix, and a tied
// head is the token embedding.
std::string storedName(const SafetensorsDirectory& files, const std::string& name, bool llama) {
    if (files.has(name)) return name;
    const std::string prefix = "transformer.";
    if (!llama && name.rfind(prefix, 0) == 0 && files.has(name.substr(prefix.size()))) return name.substr(prefix.size());
    if (name == "lm_head.weight") return storedName(files, llama ? "model.embed_tokens.weight" : "transformer.wte.weight", llama);
    return name;
}

// Sliding-window attention: Mistral's sliding_window (null: none), or Qwen's use_sliding_window over the layers
// from max_window_layers on (transformers 5 writes them out as layer_types). kiln slides every layer or none.
template <typename Refuse>
void readSlidingWindow(const json& config, const arch::HuggingFaceFamily& family, arch::ModelConfig& m,
                       const Refuse& refuse) {
    const auto window = field<std::uint32_t>(config, "sliding_window", 0);
    if (family.window == arch::WindowField::SlidingWindow) {
        m.slidingWindow = window;
        return;
    }
    if (family.window == arch::WindowField::None || !field<bool>(config, "use_sliding_window", false)) return;
    std::size_t sliding = 0;
    if (config.contains("layer_types") && config["layer_types"].is_array()) {
        for (const auto& kind : config["layer_types"]) sliding += kind == "sliding_attention" ? 1 : 0;
    } else {
        const auto from = field<std::uint32_t>(config, "max_window_layers", 0);
        sliding = from >= m.blocks ? 0 : m.blocks - from;
    }
    if (sliding != 0 && sliding != m.blocks)
        throw refuse(fmt::format("use_sliding_window = true on {} of {} layers (kiln slides the window on every layer "
                                 "or none)",
                                 sliding, m.blocks));
    if (sliding != 0 && window == 0) throw refuse("use_sliding_window = true without a sliding_window");
    if (sliding != 0) m.slidingWindow = window;
}

// A mixture of experts' fields, as Mixtral, Qwen 3 MoE and OLMoE name them. What kiln does not compute (a
// router's jitter, dense layers among the sparse ones, clipped q/k/v) is refused by its field.
template <typename Refuse>
void readExperts(const json& config, const arch::HuggingFaceFamily& family, arch::ModelConfig& m, const Refuse& refuse) {
    auto& e = m.experts;
    // transformers 5 writes num_local_experts for all three; its configs before, and the published ones, each its own.
    const std::string own = family.expertCountKey;
    const char* other = own == "num_experts" ? "num_local_experts" : "num_experts";
    e.count = field<std::uint32_t>(config, own.c_str(), field<std::uint32_t>(config, other, 0));
    e.perToken = field<std::uint32_t>(config, "num_experts_per_tok", 2);
    e.width = field<std::uint32_t>(config, family.expertWidthKey, 0);
    if (e.count == 0 || e.perToken == 0 || e.perToken > e.count || e.width == 0)
        throw refuse(fmt::format("{} experts, {} per token, {} wide: not a mixture kiln can train", e.count, e.perToken,
                                 e.width));
    // Mixtral renormalises the chosen experts' weights; the others say so by norm_topk_prob.
    e.softmax = family.renormalisesChosen || field<bool>(config, "norm_topk_prob", false)
                    ? arch::Experts::Softmax::AfterTopK
                    : arch::Experts::Softmax::BeforeTopK;
    if (const double jitter = field<double>(config, "router_jitter_noise", 0.0); jitter != 0.0)
        throw refuse(fmt::format("router_jitter_noise = {:g} (kiln's router adds no noise)", jitter));
}

// The fields the class has that kiln computes at one value only (absent or null: the class's default, which is it).
template <typename Refuse>
void checkFixedFields(const json& config, const arch::HuggingFaceFamily& family, const Refuse& refuse) {
    for (const auto& fixed : family.fixed) {
        const auto it = config.find(fixed.key);
        if (it == config.end() || it->is_null()) continue;
        if (*it != json::parse(fixed.json)) throw refuse(fmt::format("{} = {} ({})", fixed.key, it->dump(), fixed.why));
    }
}

// The rotary settings: transformers 5 keeps them in rope_parameters (rope_theta inside), earlier versions in
// rope_theta and rope_scaling. Each scaling transformers computes and kiln does too is read; another is
// refused by name.
template <typename Refuse>
void readRotary(const json& config, arch::ModelConfig& m, const Refuse& refuse) {
    using Kind = arch::RopeScaling::Kind;
    m.ropeTheta = field<double>(config, "rope_theta", 10000.0);
    json rope;
    std::string where;
    if (config.contains("rope_parameters") && config["rope_parameters"].is_object()) {
        rope = config["rope_parameters"];
        where = "rope_parameters";
    } else if (config.contains("rope_scaling") && config["rope_scaling"].is_object()) {
        rope = config["rope_scaling"];
        where = "rope_scaling";
    } else {
        return;
    }
    m.ropeTheta = field<double>(rope, "rope_theta", m.ropeTheta);
    const std::string kind = field<std::string>(rope, "rope_type", field<std::string>(rope, "type", "default"));
    if (const double partial = field<double>(rope, "partial_rotary_factor", field<double>(config, "partial_rotary_factor", 1.0));
        partial != 1.0)
        throw refuse(fmt::format("partial_rotary_factor = {:g} (kiln rotates every dimension of a head)", partial));
    auto& r = m.rope;
    const auto originalContext = [&] {
        const auto it = rope.find("original_max_position_embeddings");
        if (it == rope.end() || it->is_null())
            throw refuse(fmt::format("{}.rope_type = '{}' without original_max_position_embeddings", where, kind));
        return it->get<std::uint32_t>();
    };
    if (kind == "default") {
        r.kind = Kind::None;
    } else if (kind == "linear") {
        r.kind = Kind::Linear;
        r.factor = field<double>(rope, "factor", 1.0);
    } else if (kind == "llama3") {
        r.kind = Kind::Llama3;
        r.factor = field<double>(rope, "factor", 8.0);
        r.lowFreqFactor = field<double>(rope, "low_freq_factor", 1.0);
        r.highFreqFactor = field<double>(rope, "high_freq_factor", 4.0);
        r.originalContext = originalContext();
    } else if (kind == "yarn") {
        r.kind = Kind::Yarn;
        r.originalContext = originalContext();
        r.factor = field<double>(rope, "factor", double(m.seqLen) / r.originalContext);
        r.betaFast = field<double>(rope, "beta_fast", 32.0);
        r.betaSlow = field<double>(rope, "beta_slow", 1.0);
        r.attentionFactor = field<double>(rope, "attention_factor", 0.0);
        if (field<double>(rope, "mscale", 0.0) != 0.0 || field<double>(rope, "mscale_all_dim", 0.0) != 0.0)
            throw refuse(fmt::format("{}: yarn with mscale / mscale_all_dim (DeepSeek's attention factor; kiln takes "
                                     "attention_factor or 0.1 ln(factor) + 1)",
                                     where));
        if (!field<bool>(rope, "truncate", true)) throw refuse(fmt::format("{}: yarn with truncate = false", where));
    } else {
        throw refuse(fmt::format("{}.rope_type = '{}' (kiln scales rotary embeddings as 'default', 'linear', 'llama3' "
                                 "and 'yarn')",
                                 where, kind));
    }
}

}  // namespace

arch::ModelConfig readHuggingFaceConfig(const std::filesystem::path& dir) {
    const auto path = dir / "config.json";
    const json config = readJson(path);
    const std::string type = field<std::string>(config, "model_type", "");
    const auto refuse = [&](const std::string& what) {
        return InputError(fmt::format("{}: {}; kiln cannot start from this model", path.string(), what));
    };
    const arch::HuggingFaceFamily* family = arch::familyOfModelType(type);
    if (family == nullptr)
        throw refuse(fmt::format("model_type = '{}' (kiln reads {})", type, arch::knownModelTypes()));
    checkFixedFields(config, *family, refuse);
    arch::ModelConfig m;
    m.family = family->family;
    if (m.llama()) {
        // The class's attention and MLP (hf_families.cpp): Qwen 2's q/k/v biases, Qwen 3's and OLMoE's q/k norms,
        // experts in place of the dense MLP.
        m.qkvBias = family->qkvBias;
        m.qkNorm = family->qkNorm;
        m.qkNormProjection = family->qkNormProjection;
        m.blocks = required<std::uint32_t>(config, "num_hidden_layers", path);
        m.dModel = required<std::uint32_t>(config, "hidden_size", path);
        m.heads = required<std::uint32_t>(config, "num_attention_heads", path);
        m.kvHeads = field<std::uint32_t>(config, "num_key_value_heads", m.heads);
        m.ffnHidden = required<std::uint32_t>(config, "intermediate_size", path);
        if (family->experts) readExperts(config, *family, m, refuse);
        m.normEps = field<double>(config, "rms_norm_eps", 1e-6);
        m.seqLen = field<std::uint32_t>(config, "max_position_embeddings", 2048);
        m.maxPositions = m.seqLen;  // kept through training at any data.seq_len, and written back by export
        readRotary(config, m, refuse);
        if (const auto act = field<std::string>(config, "hidden_act", "silu"); act != "silu")
            throw refuse(fmt::format("hidden_act = '{}' (kiln's SwiGLU uses silu)", act));
        if (field<bool>(config, "attention_bias", false))
            throw refuse("attention_bias = true (biases on q, k, v and o; kiln's llama has Qwen 2's on q, k and v only)");
        readSlidingWindow(config, *family, m, refuse);
        if (field<bool>(config, "mlp_bias", false)) throw refuse("mlp_bias = true (kiln's llama has no biases)");
        if (const auto tp = field<int>(config, "pretraining_tp", 1); tp != 1)
            throw refuse(fmt::format("pretraining_tp = {} (kiln computes its linear layers unsplit: 1)", tp));
        // head_dim apart from hidden_size / heads (Qwen 3; Mistral Nemo): kept as model.head_dim.
        if (const auto headDim = field<std::uint32_t>(config, "head_dim", 0); headDim != 0 &&
                                                                               (m.dModel % m.heads != 0 || headDim != m.dModel / m.heads))
            m.headDimension = headDim;
        if (m.dModel % m.heads != 0 && m.headDimension == 0)
            throw refuse(fmt::format("hidden_size = {} is not a multiple of num_attention_heads = {} and head_dim is not set",
                                     m.dModel, m.heads));
    } else {
        m.blocks = required<std::uint32_t>(config, "n_layer", path);
        m.dModel = required<std::uint32_t>(config, "n_embd", path);
        m.heads = required<std::uint32_t>(config, "n_head", path);
        const auto inner = field<std::uint32_t>(config, "n_inner", 4 * m.dModel);
        if (inner % m.dModel != 0) throw refuse(fmt::format("n_inner = {} is not a multiple of n_embd = {}", inner, m.dModel));
        m.mlpRatio = inner / m.dModel;
        m.seqLen = required<std::uint32_t>(config, "n_positions", path);
        if (const auto act = field<std::string>(config, "activation_function", "gelu_new");
            act != "gelu_new" && act != "gelu_pytorch_tanh")
            throw refuse(fmt::format("activation_function = '{}' (kiln's GPT-2 uses GELU's tanh approximation, gelu_new)", act));
        if (const double eps = field<double>(config, "layer_norm_epsilon", 1e-5); eps != 1e-5)
            throw refuse(fmt::format("layer_norm_epsilon = {:g} (kiln's LayerNorm uses 1e-5)", eps));
        if (field<bool>(config, "scale_attn_by_inverse_layer_idx", false))
            throw refuse("scale_attn_by_inverse_layer_idx = true");
    }
    m.vocabSize = required<std::uint32_t>(config, "vocab_size", path);
    // The class it was saved as, for kiln export to write the same (the maths is the model_type's).
    if (const auto classes = field<json>(config, "architectures", json()); classes.is_array() && classes.size() == 1)
        if (const auto* saved = arch::familyOfArchitecture(classes[0].is_string() ? classes[0].get<std::string>() : ""))
            m.hfArchitecture = saved->architecture;
    // transformers' defaults: GPT-2 ties its head, Llama does not.
    m.tieEmbeddings = field<bool>(config, "tie_word_embeddings", !m.llama());
    return m;
}

namespace {

std::string ropeDeckLines(const arch::RopeScaling& r) {
    using Kind = arch::RopeScaling::Kind;
    if (r.kind == Kind::None) return "";
    std::string text = fmt::format("rope_scaling = {}\nrope_factor = {:g}\n", arch::ropeScalingName(r.kind), r.factor);
    if (r.kind == Kind::Llama3)
        text += fmt::format("rope_low_freq_factor = {:g}\nrope_high_freq_factor = {:g}\n", r.lowFreqFactor, r.highFreqFactor);
    if (r.kind == Kind::Yarn)
        text += fmt::format("rope_beta_fast = {:g}\nrope_beta_slow = {:g}\nrope_attention_factor = {:g}\n", r.betaFast,
                            r.betaSlow, r.attentionFactor);
    if (r.kind != Kind::Linear) text += fmt::format("rope_original_context = {}\n", r.originalContext);
    return text;
}

}  // namespace

std::string deckLinesFor(const arch::ModelConfig& m) {
    std::string text = fmt::format("[model]\nfamily = {}\nvocab = {}\nblocks = {}\nd_model = {}\nheads = {}\n",
                                   arch::familyName(m.family), m.vocabSize, m.blocks, m.dModel, m.heads);
    if (m.llama())
        text += fmt::format("kv_heads = {}\nffn_hidden = {}\nnorm_eps = {:g}\nrope_theta = {:g}\n{}", m.keyValueHeads(),
                            m.ffnHidden, m.normEps, m.ropeTheta, ropeDeckLines(m.rope));
    if (m.llama() && m.maxPositions != 0) text += fmt::format("max_positions = {}\n", m.maxPositions);
    if (m.llama() && m.headDimension != 0) text += fmt::format("head_dim = {}\n", m.headDimension);
    if (m.qkvBias) text += "qkv_bias = true\n";
    if (m.qkNorm) text += "qk_norm = true\n";
    if (m.qkNormProjection) text += "qk_norm_over = projection\n";
    if (m.experts.any())
        text += fmt::format("experts = {}\nexperts_per_token = {}\nexpert_hidden = {}\nrouter_softmax = {}\n",
                            m.experts.count, m.experts.perToken, m.experts.width,
                            arch::routerSoftmaxName(m.experts.softmax));
    if (m.slidingWindow != 0) text += fmt::format("sliding_window = {}\n", m.slidingWindow);
    if (!m.llama()) text += fmt::format("mlp_ratio = {}\n", m.mlpRatio);
    text += fmt::format("tie_embeddings = {}\n", m.tieEmbeddings ? "true" : "false");
    if (!m.hfArchitecture.empty()) text += fmt::format("hf_architecture = {}\n", m.hfArchitecture);
    return text;
}

std::string initFromProblem(const arch::ModelConfig& hf, const arch::ModelConfig& run, const std::filesystem::path& dir) {
    std::vector<std::string> differences;
    const auto differ = [&](const char* key, const char* field, auto deckValue, auto hfValue) {
        if (deckValue != hfValue)
            differences.push_back(fmt::format("{} = {} in the deck, {} = {} in config.json", key, deckValue, field, hfValue));
    };
    differ("model.family", "model_type", std::string(arch::familyName(run.family)), std::string(arch::familyName(hf.family)));
    const bool llama = hf.llama();
    differ("model.blocks", llama ? "num_hidden_layers" : "n_layer", run.blocks, hf.blocks);
    differ("model.d_model", llama ? "hidden_size" : "n_embd", run.dModel, hf.dModel);
    differ("model.heads", llama ? "num_attention_heads" : "n_head", run.heads, hf.heads);
    differ("the vocabulary (model.vocab, else the data's tokenizer)", "vocab_size", run.vocabSize, hf.vocabSize);
    if (llama && run.llama()) {
        differ("model.kv_heads", "num_key_value_heads", run.keyValueHeads(), hf.keyValueHeads());
        if (!hf.experts.any() || !run.experts.any())  // a mixture has no dense MLP: its ffn_hidden is unused
            differ("model.ffn_hidden", "intermediate_size", run.ffnHidden, hf.ffnHidden);
        differ("model.norm_eps", "rms_norm_eps", run.normEps, hf.normEps);
        differ("model.rope_theta", "rope_theta", run.ropeTheta, hf.ropeTheta);
        differ("model.head_dim", "head_dim", run.headDim(), hf.headDim());
        differ("model.qkv_bias", "model_type qwen2's q/k/v biases", run.qkvBias, hf.qkvBias);
        differ("model.qk_norm", "model_type qwen3's q/k norms", run.qkNorm, hf.qkNorm);
        differ("model.qk_norm_over", "model_type olmoe's q/k norms over the projection",
               std::string(run.qkNormProjection ? "projection" : "head"), std::string(hf.qkNormProjection ? "projection" : "head"));
        differ("model.experts", "num_experts", run.experts.count, hf.experts.count);
        differ("model.experts_per_token", "num_experts_per_tok", run.experts.perToken, hf.experts.perToken);
        differ("model.expert_hidden", "the experts' intermediate size", run.experts.width, hf.experts.width);
        differ("model.shared_expert_hidden", "a shared expert's width", run.experts.sharedWidth, hf.experts.sharedWidth);
        differ("model.router_softmax", "norm_topk_prob", std::string(arch::routerSoftmaxName(run.experts.softmax)),
               std::string(arch::routerSoftmaxName(hf.experts.softmax)));
        differ("model.sliding_window", "sliding_window", run.slidingWindow, hf.slidingWindow);
        differ("the rotary scaling (model.rope_*)", "rope_parameters", arch::ropeScalingText(run.rope),
               arch::ropeScalingText(hf.rope));
    } else if (!llama && !run.llama()) {
        differ("model.mlp_ratio", "n_inner / n_embd", run.mlpRatio, hf.mlpRatio);
        if (run.seqLen > hf.seqLen)
            differences.push_back(fmt::format("data.seq_len = {} exceeds n_positions = {} (its learned positions)",
                                              run.seqLen, hf.seqLen));
    }
    // A tied model may be trained untied (its head starts as a copy of the embedding); not the reverse.
    if (run.tieEmbeddings && !hf.tieEmbeddings)
        differences.push_back("model.tie_embeddings = true in the deck, tie_word_embeddings = false in config.json (its "
                              "head is not its embedding)");
    if (differences.empty()) return "";
    return fmt::format("model.init_from = {}: the deck's model is not the one there:\n  {}\n  kiln import {} prints the "
                       "deck's [model] section for it",
                       dir.string(), fmt::join(differences, "\n  "), dir.string());
}

void initFromHuggingFace(const std::filesystem::path& dir, model::Gpt& model) {
    torch::NoGradGuard noGrad;
    const SafetensorsDirectory files(dir);
    const auto& c = model.config();
    const auto& slice = model.slice();
    for (std::uint32_t local = 0; local < model.numLayers(); ++local) {
        const std::uint32_t layer = model.firstLayer() + local;
        const auto shapes = c.parameterShapes(layer);
        const auto specs = arch::shardSpecs(c, layer);
        const auto names = huggingFaceNames(c, layer);
        auto params = model.layer(local).parameters();
        for (std::size_t k = 0; k < names.size(); ++k) {
            if (names[k].experts != 0) {
                // One tensor per expert: this rank reads its own experts only.
                const auto mine = arch::unitRange(names[k].experts, slice.width, slice.rank);
                std::vector<torch::Tensor> experts;
                const std::vector<std::int64_t> want(shapes[k].second.begin() + 1, shapes[k].second.end());
                for (auto e = mine.first; e < mine.end; ++e) {
                    const std::string expert = names[k].expertName(static_cast<std::uint32_t>(e));
                    if (!files.has(expert))
                        throw InputError(fmt::format("{}: tensor {} is missing", dir.string(), expert), ErrorScope::ThisRank);
                    experts.push_back(files.read(expert));
                    if (experts.back().sizes().vec() != want)
                        throw InputError(fmt::format("{}: tensor {} has shape [{}], the model needs [{}]", files.fileOf(expert),
                                                     expert, fmt::join(experts.back().sizes().vec(), ", "), fmt::join(want, ", ")),
                                         ErrorScope::ThisRank);
                }
                params[k].copy_(torch::stack(experts).to(params[k].device(), params[k].scalar_type()));
                continue;
            }
            // A tied run's head is the embedding, whatever else the directory holds.
            const std::string name =
                storedName(files, c.isTiedHead(layer, k) ? huggingFaceNames(c, 0)[0].name : names[k].name, c.llama());
            // Only the ranks that hold the layer see these: each ends the job with its own message.
            if (!files.has(name))
                throw InputError(fmt::format("{}: tensor {} is missing", dir.string(), names[k].name), ErrorScope::ThisRank);
            auto whole = files.read(name);
            if (names[k].transposed) whole = whole.t();
            auto want = shapes[k].second;
            // GPT-2's learned positions: the run's sequence length of the checkpoint's n_positions rows.
            if (layer == 0 && k == 1 && !c.llama() && whole.dim() == 2 && whole.size(0) > want[0]) whole = whole.slice(0, 0, want[0]);
            if (whole.sizes().vec() != want)
                throw InputError(fmt::format("{}: tensor {} has shape [{}], the model needs [{}]", files.fileOf(name), name,
                                             fmt::join(whole.sizes().vec(), ", "), fmt::join(want, ", ")),
                                 ErrorScope::ThisRank);
            params[k].copy_(model::shardOf(whole.contiguous(), specs[k], slice.width, slice.rank).to(params[k].device(),
                                                                                                  params[k].scalar_type()));
        }
    }
}

}  // namespace kiln::train
