#include "kiln/train/hf_export.hpp"

#include "checkpoint_format.hpp"
#include "hf_names.hpp"
#include "kiln/arch/hf_families.hpp"
#include "kiln/base/error.hpp"
#include "kiln/config/deck.hpp"
#include "kiln/data/tokenizer.hpp"
#include "kiln/io/atomic_file.hpp"
#include "kiln/model/gpt.hpp"
#include "kiln/train/checkpoint_contents.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <optional>

namespace kiln::train {
namespace {

// One tensor of the export: its Hugging Face name and shape, and where it
// comes from (parameter `index` of kiln layer `layer`, transposed or not).
struct Planned {
    std::string name;
    std::vector<std::int64_t> shape;
    std::uint32_t layer = 0;
    std::size_t index = 0;
    bool transposed = false;
    std::int64_t expert = -1;  // of a parameter of all the block's experts: this expert's part
    std::uint64_t bytes() const {
        std::uint64_t n = 4;
        for (auto d : shape) n *= static_cast<std::uint64_t>(d);
        return n;
    }
};

// The export's tensors in kiln's layer order, cut into files of at most
// `maxShardBytes` at layer boundaries (a layer larger than that alone in its
// file), so that one layer's weights at a time are in memory.
std::vector<std::vector<Planned>> planShards(const arch::ModelConfig& c, std::uint64_t maxShardBytes) {
    std::vector<std::vector<Planned>> shards(1);
    std::uint64_t inShard = 0;
    for (std::uint32_t layer = 0; layer < c.numLayers(); ++layer) {
        const auto shapes = c.parameterShapes(layer);
        const auto names = huggingFaceNames(c, layer);
        std::vector<Planned> tensors;
        std::uint64_t bytes = 0;
        for (std::size_t k = 0; k < names.size(); ++k) {
            if (c.isTiedHead(layer, k)) continue;  // tie_word_embeddings: the embedding is the head
            auto shape = shapes[k].second;
            // GPT-2's Conv1D keeps (in, out): kiln's linear weight (out, in) transposed.
            if (names[k].transposed) std::swap(shape[0], shape[1]);
            if (names[k].experts == 0) {
                tensors.push_back({names[k].name, shape, layer, k, names[k].transposed});
                bytes += tensors.back().bytes();
                continue;
            }
            const std::vector<std::int64_t> expertShape(shape.begin() + 1, shape.end());
            for (std::uint32_t e = 0; e < names[k].experts; ++e) {
                tensors.push_back({names[k].expertName(e), expertShape, layer, k, false, e});
                bytes += tensors.back().bytes();
            }
        }
        if (inShard > 0 && inShard + bytes > maxShardBytes) {
            shards.emplace_back();
            inShard = 0;
        }
        shards.back().insert(shards.back().end(), tensors.begin(), tensors.end());
        inShard += bytes;
    }
    return shards;
}

std::vector<float> transposed(const std::vector<float>& values, std::int64_t out, std::int64_t in) {
    std::vector<float> t(values.size());
    for (std::int64_t o = 0; o < out; ++o)
        for (std::int64_t i = 0; i < in; ++i) t[static_cast<std::size_t>(i * out + o)] = values[static_cast<std::size_t>(o * in + i)];
    return t;
}

// safetensors: an 8-byte little-endian header length, the JSON header
// (name -> dtype, shape, data_offsets), then the tensors' bytes in order.
// Written layer by layer from the checkpoint.
void writeSafetensors(const std::filesystem::path& path, const std::filesystem::path& checkpoint,
                      const arch::ModelConfig& c, const std::vector<Planned>& tensors) {
    nlohmann::ordered_json header;
    header["__metadata__"] = {{"format", "pt"}, {"producer", "kiln export"}};
    std::uint64_t offset = 0;
    for (const auto& t : tensors) {
        header[t.name] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.bytes()}}};
        offset += t.bytes();
    }
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' ');  // the data starts 8-byte aligned
    const auto temporary = io::temporarySibling(path);
    {
        std::ofstream out(temporary, std::ios::binary);
        const std::uint64_t length = text.size();
        unsigned char le[8];
        for (int k = 0; k < 8; ++k) le[k] = static_cast<unsigned char>(length >> (8 * k));
        out.write(reinterpret_cast<const char*>(le), 8);
        out.write(text.data(), static_cast<std::streamsize>(text.size()));
        std::optional<std::uint32_t> loaded;
        std::vector<std::vector<float>> weights;
        for (const auto& t : tensors) {
            if (loaded != t.layer) {
                weights = readWeights(checkpoint, c, t.layer);
                loaded = t.layer;
            }
            const auto& values = weights[t.index];
            if (t.expert >= 0) {  // expert e's rows of the (E, ...) parameter
                const std::uint64_t count = t.bytes() / 4;
                out.write(reinterpret_cast<const char*>(values.data() + t.expert * count), static_cast<std::streamsize>(4 * count));
                continue;
            }
            const auto& written = t.transposed ? transposed(values, t.shape[1], t.shape[0]) : values;
            out.write(reinterpret_cast<const char*>(written.data()), static_cast<std::streamsize>(4 * written.size()));
        }
        out.flush();
        if (!out) throw Error(fmt::format("{}: cannot write", temporary.string()), ErrorScope::ThisRank);
    }
    io::commitTemporary(temporary, path);
}

// Two sequences of ids and kiln's logits for them (every position; only the
// last one when the vocabulary is large).
nlohmann::json referenceLogits(const std::filesystem::path& checkpoint, const arch::ModelConfig& config) {
    torch::NoGradGuard noGrad;
    model::Gpt gpt(config);
    for (std::uint32_t l = 0; l < config.numLayers(); ++l) {
        const auto weights = readWeights(checkpoint, config, l);
        auto params = gpt.layer(l).parameters();
        for (std::size_t k = 0; k < params.size(); ++k)
            params[k].copy_(torch::from_blob(const_cast<float*>(weights[k].data()), params[k].sizes(), torch::kFloat32));
    }
    const std::int64_t T = std::min<std::int64_t>(8, config.seqLen), V = config.vocabSize;
    auto ids = torch::empty({2, T}, torch::kInt64);
    for (std::int64_t b = 0; b < 2; ++b)
        for (std::int64_t t = 0; t < T; ++t) ids[b][t] = (b * 131 + t * 17 + 3) % V;
    const auto logits = gpt.forward(ids).to(torch::kFloat32).contiguous();
    const bool all = 2 * T * V <= 200000;
    nlohmann::json out;
    out["tokens"] = nlohmann::json::array();
    out["positions"] = all ? "all" : "last";
    out["logits"] = nlohmann::json::array();
    for (std::int64_t b = 0; b < 2; ++b) {
        std::vector<std::int64_t> row(ids[b].data_ptr<std::int64_t>(), ids[b].data_ptr<std::int64_t>() + T);
        out["tokens"].push_back(row);
        nlohmann::json positions = nlohmann::json::array();
        for (std::int64_t t = all ? 0 : T - 1; t < T; ++t) {
            const float* p = logits[b][t].data_ptr<float>();
            positions.push_back(std::vector<float>(p, p + V));
        }
        out["logits"].push_back(positions);
    }
    return out;
}

nlohmann::ordered_json gpt2Config(const arch::ModelConfig& c) {
    return {{"architectures", {"GPT2LMHeadModel"}},
            {"model_type", "gpt2"},
            {"vocab_size", c.vocabSize},
            {"n_positions", c.seqLen},
            {"n_ctx", c.seqLen},
            {"n_embd", c.dModel},
            {"n_layer", c.blocks},
            {"n_head", c.heads},
            {"n_inner", c.mlpWidth()},
            {"activation_function", "gelu_new"},  // GELU with the tanh approximation, as kiln trains
            {"layer_norm_epsilon", 1e-5},
            {"resid_pdrop", 0.0},
            {"embd_pdrop", 0.0},
            {"attn_pdrop", 0.0},
            {"scale_attn_weights", true},
            {"tie_word_embeddings", c.tieEmbeddings},
            {"torch_dtype", "float32"}};
}

// The rotary scaling as transformers spells it (rope_scaling: read by transformers 4 and, converted to its
// rope_parameters, by 5); null when unscaled.
nlohmann::ordered_json ropeScalingJson(const arch::RopeScaling& r) {
    using Kind = arch::RopeScaling::Kind;
    if (r.kind == Kind::None) return nullptr;
    nlohmann::ordered_json j = {{"rope_type", arch::ropeScalingName(r.kind)}, {"factor", r.factor}};
    if (r.kind == Kind::Llama3) {
        j["low_freq_factor"] = r.lowFreqFactor;
        j["high_freq_factor"] = r.highFreqFactor;
    }
    if (r.kind == Kind::Yarn) {
        j["beta_fast"] = r.betaFast;
        j["beta_slow"] = r.betaSlow;
        if (r.attentionFactor > 0.0) j["attention_factor"] = r.attentionFactor;
    }
    if (r.kind != Kind::Linear) j["original_max_position_embeddings"] = r.originalContext;
    return j;
}

}  // namespace

namespace {

// The llama family's config, under the class's model_type (hf_families.cpp); the experts' fields are added by
// addExperts.
nlohmann::ordered_json llamaConfig(const arch::ModelConfig& c, const arch::HuggingFaceFamily& family) {
    const bool qwen = family.window == arch::WindowField::QwenLayers;
    nlohmann::ordered_json sliding = nullptr;
    if (c.slidingWindow != 0) sliding = c.slidingWindow;
    return {{"architectures", {family.architecture}},
            {"model_type", family.modelType},
            {"vocab_size", c.vocabSize},
            {"hidden_size", c.dModel},
            {"intermediate_size", c.mlpWidth()},
            {"num_hidden_layers", c.blocks},
            {"num_attention_heads", c.heads},
            {"num_key_value_heads", c.keyValueHeads()},
            {"head_dim", c.headDim()},
            {"hidden_act", "silu"},
            {"max_position_embeddings", c.contextLength()},  // the model's own, not the run's data.seq_len
            {"rms_norm_eps", c.normEps},
            {"rope_theta", c.ropeTheta},
            {"rope_scaling", ropeScalingJson(c.rope)},
            {"attention_bias", false},
            {"mlp_bias", false},
            {"use_sliding_window", qwen && c.slidingWindow != 0},
            {"sliding_window", sliding},
            {"max_window_layers", 0},  // Qwen: the window on every layer from the first (read only with the above)
            {"attention_dropout", 0.0},
            {"tie_word_embeddings", c.tieEmbeddings},
            {"torch_dtype", "float32"}};
}

// The experts' fields, as the class names them, and the fields it has that kiln computes at one value. kiln's
// balance loss is per sequence and summed over the blocks, transformers' pooled over them: router_aux_loss_coef
// carries kiln's weight, not its maths.
void addExperts(nlohmann::ordered_json& config, const arch::ModelConfig& c, const arch::HuggingFaceFamily& family) {
    const auto& e = c.experts;
    config["num_experts_per_tok"] = e.perToken;
    config["router_aux_loss_coef"] = e.auxLossCoef;
    config["output_router_logits"] = false;
    config[family.expertCountKey] = e.count;
    config[family.expertWidthKey] = e.width;
    if (!family.renormalisesChosen) config["norm_topk_prob"] = e.softmax == arch::Experts::Softmax::AfterTopK;
    for (const auto& fixed : family.fixed) config[fixed.key] = nlohmann::ordered_json::parse(fixed.json);
}

// The id that ends each document in kiln's token stream (the data's tokenizer's EOS), from the deck the
// checkpoint keeps; empty when that tokenizer cannot be opened here. kiln starts documents with no BOS.
std::optional<std::uint32_t> documentEndId(const std::filesystem::path& checkpoint, std::string& why) {
    try {
        std::string deckText;
        {
            std::int64_t version = 0;
            io::h5::Handle file = format::openCheckpoint(checkpoint.string(), version);
            io::h5::LibraryLock lock(io::h5::libraryMutex());
            deckText = io::h5::readStringAttribute(file, "deck", checkpoint.string());
        }
        const auto deck = config::Deck::fromText(deckText, checkpoint.string() + " (its deck)");
        return data::openTokenizer(deck.text("data.tokenizer"))->info().eosId;
    } catch (const std::exception& e) {
        why = e.what();
        return std::nullopt;
    }
}

// A tied model's two copies (the first stage's embedding, the last stage's
// head) as the checkpoint holds them: equal unless kiln failed to keep them so.
std::string tiedCopiesNote(const std::filesystem::path& checkpoint, const arch::ModelConfig& c) {
    const auto embedding = readWeights(checkpoint, c, 0)[arch::ModelConfig::kTokenEmbedding];
    const auto head = readWeights(checkpoint, c, c.numLayers() - 1)[c.headIndex()];
    double worst = 0.0;
    for (std::size_t i = 0; i < embedding.size(); ++i)
        worst = std::max(worst, std::abs(double(embedding[i]) - double(head[i])));
    if (worst == 0.0) return "tied head: written once, as the embedding (the last stage's copy equals it bit for bit)";
    return fmt::format("tied head: written once, as the embedding; the last stage's copy differs from it by up to {:.3g}",
                       worst);
}

}  // namespace

ExportReport exportToHuggingFace(const std::filesystem::path& checkpoint, const std::filesystem::path& dir,
                                 const ExportOptions& options) {
    const auto contents = readContents(checkpoint, /*verify=*/false);
    const auto& c = contents.model;
    const auto& family = *arch::familyOfArchitecture(huggingFaceArchitecture(c));
    auto config = c.llama() ? llamaConfig(c, family) : gpt2Config(c);
    if (c.experts.any()) addExperts(config, c, family);
    std::string why;
    const auto eos = documentEndId(checkpoint, why);
    config["bos_token_id"] = nullptr;
    config["eos_token_id"] = eos ? nlohmann::ordered_json(*eos) : nlohmann::ordered_json(nullptr);
    config["kiln_checkpoint"] = checkpoint.filename().string();
    config["kiln_step"] = contents.step;
    std::filesystem::create_directories(dir);
    // Nothing of a llama is transposed or permuted: kiln's rotary embeddings use Hugging Face's "rotate half".
    const auto shards = planShards(c, options.maxShardBytes);
    ExportReport report;
    report.parameters = double(c.parameters());
    report.architecture = huggingFaceArchitecture(c);
    nlohmann::ordered_json weightMap = nlohmann::ordered_json::object();
    for (std::size_t k = 0; k < shards.size(); ++k) {
        // Hugging Face's names: one file is model.safetensors, several are numbered from 1 with an index.
        const std::string name = shards.size() == 1 ? "model.safetensors"
                                                    : fmt::format("model-{:05}-of-{:05}.safetensors", k + 1, shards.size());
        writeSafetensors(dir / name, checkpoint, c, shards[k]);
        report.files.push_back(name);
        for (const auto& t : shards[k]) {
            weightMap[t.name] = name;
            report.bytes += t.bytes();
            ++report.tensors;
        }
    }
    if (shards.size() > 1) {
        nlohmann::ordered_json index;
        index["metadata"] = {{"total_size", report.bytes}};
        index["weight_map"] = weightMap;
        io::writeFileAtomically(dir / "model.safetensors.index.json", index.dump(2) + "\n");
        report.files.push_back("model.safetensors.index.json");
    }
    io::writeFileAtomically(dir / "config.json", config.dump(2) + "\n");
    report.files.push_back("config.json");
    // The reference forward holds the whole model in memory, once more: only for models that fit easily.
    if (report.bytes <= options.maxReferenceBytes) {
        io::writeFileAtomically(dir / "kiln_reference.json", referenceLogits(checkpoint, c).dump() + "\n");
        report.files.push_back("kiln_reference.json");
    } else {
        report.notes.push_back(fmt::format("kiln_reference.json not written: the model's {:.1f} GB exceed "
                                           "--reference-max-mb", report.bytes / 1e9));
    }
    if (c.tieEmbeddings) report.notes.push_back(tiedCopiesNote(checkpoint, c));
    if (!eos) report.notes.push_back(fmt::format("eos_token_id left empty: the run's tokenizer cannot be opened here ({})", why));
    return report;
}

}  // namespace kiln::train
