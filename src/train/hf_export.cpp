#include "kiln/train/hf_export.hpp"

#include "checkpoint_format.hpp"
#include "kiln/base/error.hpp"
#include "kiln/config/deck.hpp"
#include "kiln/data/tokenizer.hpp"
#include "kiln/io/atomic_file.hpp"
#include "kiln/model/gpt.hpp"
#include "kiln/train/checkpoint_contents.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <optional>

namespace kiln::train {
namespace {

struct Tensor {
    std::string name;
    std::vector<std::int64_t> shape;
    std::vector<float> values;
};

// GPT-2's Conv1D keeps (in, out): kiln's linear weight (out, in) transposed.
Tensor transposed(std::string name, const std::vector<float>& values, std::int64_t out, std::int64_t in) {
    Tensor t{std::move(name), {in, out}, std::vector<float>(values.size())};
    for (std::int64_t o = 0; o < out; ++o)
        for (std::int64_t i = 0; i < in; ++i) t.values[static_cast<std::size_t>(i * out + o)] = values[static_cast<std::size_t>(o * in + i)];
    return t;
}

// safetensors: an 8-byte little-endian header length, the JSON header
// (name -> dtype, shape, data_offsets), then the tensors' bytes in order.
void writeSafetensors(const std::filesystem::path& path, const std::vector<Tensor>& tensors) {
    nlohmann::ordered_json header;
    header["__metadata__"] = {{"format", "pt"}, {"producer", "kiln export"}};
    std::uint64_t offset = 0;
    for (const auto& t : tensors) {
        const std::uint64_t bytes = 4 * t.values.size();
        header[t.name] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
        offset += bytes;
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
        for (const auto& t : tensors)
            out.write(reinterpret_cast<const char*>(t.values.data()), static_cast<std::streamsize>(4 * t.values.size()));
        if (!out) throw Error(fmt::format("{}: cannot write", temporary.string()), ErrorScope::ThisRank);
    }
    io::commitTemporary(temporary, path);
}

// Two sequences of ids and kiln's logits for them (every position; only the
// last one when the vocabulary is large).
nlohmann::json referenceLogits(const std::filesystem::path& checkpoint, const model::ModelConfig& config) {
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

// GPT2LMHeadModel's tensors (its Conv1D weights transposed) and config.
std::vector<Tensor> gpt2Tensors(const std::filesystem::path& checkpoint, const model::ModelConfig& c) {
    const std::int64_t C = c.dModel, H = c.mlpWidth();
    std::vector<Tensor> tensors;
    const auto add = [&](std::string name, std::vector<std::int64_t> shape, std::vector<float> values) {
        tensors.push_back({std::move(name), std::move(shape), std::move(values)});
    };
    {
        auto w = readWeights(checkpoint, c, 0);
        add("transformer.wte.weight", {c.vocabSize, C}, std::move(w[0]));
        add("transformer.wpe.weight", {c.seqLen, C}, std::move(w[1]));
    }
    for (std::uint32_t b = 0; b < c.blocks; ++b) {
        // ln1 w, b; qkv w, b; proj w, b; ln2 w, b; fc w, b; out w, b (parameterShapes order).
        auto w = readWeights(checkpoint, c, b + 1);
        const std::string p = fmt::format("transformer.h.{}.", b);
        add(p + "ln_1.weight", {C}, std::move(w[0]));
        add(p + "ln_1.bias", {C}, std::move(w[1]));
        tensors.push_back(transposed(p + "attn.c_attn.weight", w[2], 3 * C, C));
        add(p + "attn.c_attn.bias", {3 * C}, std::move(w[3]));
        tensors.push_back(transposed(p + "attn.c_proj.weight", w[4], C, C));
        add(p + "attn.c_proj.bias", {C}, std::move(w[5]));
        add(p + "ln_2.weight", {C}, std::move(w[6]));
        add(p + "ln_2.bias", {C}, std::move(w[7]));
        tensors.push_back(transposed(p + "mlp.c_fc.weight", w[8], H, C));
        add(p + "mlp.c_fc.bias", {H}, std::move(w[9]));
        tensors.push_back(transposed(p + "mlp.c_proj.weight", w[10], C, H));
        add(p + "mlp.c_proj.bias", {C}, std::move(w[11]));
    }
    {
        auto w = readWeights(checkpoint, c, c.numLayers() - 1);
        add("transformer.ln_f.weight", {C}, std::move(w[0]));
        add("transformer.ln_f.bias", {C}, std::move(w[1]));
        add("lm_head.weight", {c.vocabSize, C}, std::move(w[2]));
    }
    return tensors;
}

nlohmann::ordered_json gpt2Config(const model::ModelConfig& c) {
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
            {"tie_word_embeddings", false},
            {"torch_dtype", "float32"}};
}

// LlamaForCausalLM's tensors: kiln's names mapped, nothing transposed or permuted (kiln's rotary
// embeddings use Hugging Face's "rotate half" convention).
std::vector<Tensor> llamaTensors(const std::filesystem::path& checkpoint, const model::ModelConfig& c) {
    std::vector<Tensor> tensors;
    const auto addLayer = [&](std::uint32_t layer, const std::vector<std::string>& names) {
        auto w = readWeights(checkpoint, c, layer);
        const auto shapes = c.parameterShapes(layer);
        for (std::size_t k = 0; k < names.size(); ++k) tensors.push_back({names[k], shapes[k].second, std::move(w[k])});
    };
    addLayer(0, {"model.embed_tokens.weight"});
    for (std::uint32_t b = 0; b < c.blocks; ++b) {
        const std::string p = fmt::format("model.layers.{}.", b);
        // attn norm, q, k, v, o, MLP norm, gate, up, down (parameterShapes order).
        addLayer(b + 1, {p + "input_layernorm.weight", p + "self_attn.q_proj.weight", p + "self_attn.k_proj.weight",
                         p + "self_attn.v_proj.weight", p + "self_attn.o_proj.weight", p + "post_attention_layernorm.weight",
                         p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight", p + "mlp.down_proj.weight"});
    }
    addLayer(c.numLayers() - 1, {"model.norm.weight", "lm_head.weight"});
    return tensors;
}

nlohmann::ordered_json llamaConfig(const model::ModelConfig& c) {
    return {{"architectures", {"LlamaForCausalLM"}},
            {"model_type", "llama"},
            {"vocab_size", c.vocabSize},
            {"hidden_size", c.dModel},
            {"intermediate_size", c.mlpWidth()},
            {"num_hidden_layers", c.blocks},
            {"num_attention_heads", c.heads},
            {"num_key_value_heads", c.keyValueHeads()},
            {"head_dim", c.headDim()},
            {"hidden_act", "silu"},
            {"max_position_embeddings", c.seqLen},
            {"rms_norm_eps", c.normEps},
            {"rope_theta", c.ropeTheta},
            {"attention_bias", false},
            {"mlp_bias", false},
            {"attention_dropout", 0.0},
            {"tie_word_embeddings", false},
            {"torch_dtype", "float32"}};
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

}  // namespace

ExportReport exportToHuggingFace(const std::filesystem::path& checkpoint, const std::filesystem::path& dir) {
    const auto contents = readContents(checkpoint, /*verify=*/false);
    const auto& c = contents.model;
    const std::vector<Tensor> tensors = c.llama() ? llamaTensors(checkpoint, c) : gpt2Tensors(checkpoint, c);
    auto config = c.llama() ? llamaConfig(c) : gpt2Config(c);
    std::string why;
    const auto eos = documentEndId(checkpoint, why);
    config["bos_token_id"] = nullptr;
    config["eos_token_id"] = eos ? nlohmann::ordered_json(*eos) : nlohmann::ordered_json(nullptr);
    config["kiln_checkpoint"] = checkpoint.filename().string();
    config["kiln_step"] = contents.step;
    std::filesystem::create_directories(dir);
    writeSafetensors(dir / "model.safetensors", tensors);
    io::writeFileAtomically(dir / "config.json", config.dump(2) + "\n");
    io::writeFileAtomically(dir / "kiln_reference.json", referenceLogits(checkpoint, c).dump() + "\n");
    ExportReport report;
    report.tensors = tensors.size();
    for (const auto& t : tensors) report.bytes += 4 * t.values.size();
    report.parameters = double(c.parameters());
    report.architecture = c.llama() ? "LlamaForCausalLM" : "GPT2LMHeadModel";
    if (!eos) report.note = fmt::format("eos_token_id left empty: the run's tokenizer cannot be opened here ({})", why);
    return report;
}

}  // namespace kiln::train
