#include "kiln/data/tokenizer.hpp"

#include "hf_tokenizer.hpp"
#include "kiln/base/error.hpp"
#include "kiln/base/module_loader.hpp"

#include <dlfcn.h>
#include <fmt/format.h>
#include <zlib.h>

#include <cstdlib>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace kiln::data {
namespace {

// Bytes 0..255 are their own ids; 256 is EOS.
class ByteTokenizer final : public Tokenizer {
public:
    const TokenizerInfo& info() const override { return info_; }
    void encode(std::string_view text, std::vector<std::uint32_t>& out) const override {
        for (unsigned char c : text) out.push_back(c);
    }
    std::string decode(const std::vector<std::uint32_t>& tokens) const override {
        std::string text;
        for (auto t : tokens) text += t < 256 ? std::string(1, static_cast<char>(t)) : std::string("\n<|eos|>\n");
        return text;
    }
    bool acceptsAnyBytes() const override { return true; }

private:
    TokenizerInfo info_{"bytes-v1", 257, 256};
};

// The SentencePiece module (sentencepiece_plugin.cpp), loaded once, locally
// and with deep binding; see that file for why.
class SentencePieceModule {
public:
    static const SentencePieceModule& get() {
        static const SentencePieceModule module;
        return module;
    }

    void* (*load)(const char*, std::size_t, char*, std::size_t) = nullptr;
    void (*free)(void*) = nullptr;
    int (*pieceSize)(void*) = nullptr;
    int (*eosId)(void*) = nullptr;
    int (*encode)(void*, const char*, std::size_t, void (*)(void*, const int*, std::size_t), void*, char*, std::size_t) = nullptr;
    int (*decode)(void*, const int*, std::size_t, void (*)(void*, const char*, std::size_t), void*) = nullptr;
    int (*train)(const char*, char*, std::size_t) = nullptr;

private:
    SentencePieceModule() {
        void* handle = base::openKilnModule("the SentencePiece module", "KILN_SENTENCEPIECE_MODULE",
                                            KILN_SENTENCEPIECE_MODULE, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
        bind(handle, "kiln_spm_load", load);
        bind(handle, "kiln_spm_free", free);
        bind(handle, "kiln_spm_piece_size", pieceSize);
        bind(handle, "kiln_spm_eos_id", eosId);
        bind(handle, "kiln_spm_encode", encode);
        bind(handle, "kiln_spm_decode", decode);
        bind(handle, "kiln_spm_train", train);
    }

    template <typename F>
    static void bind(void* handle, const char* name, F& function) {
        function = reinterpret_cast<F>(dlsym(handle, name));
        if (!function) throw Error(fmt::format("SentencePiece module lacks {}", name), ErrorScope::ThisRank);
    }
};

// The identity of a SentencePiece model: a CRC-32 of what decides its ids
// (every piece with its score and type, the normaliser and denormaliser, and
// the trainer settings that encoding uses), not of the file: a model file also
// records where it was trained from (the input and output paths), so two
// trainings of the same text would otherwise get two identities. The model is
// a protobuf ModelProto (pieces = 1, trainer_spec = 2, normalizer_spec = 3,
// denormalizer_spec = 5); Debian ships no header for it, so the wire format is
// walked here.
class ProtoFields {
public:
    explicit ProtoFields(std::string_view bytes) : bytes_(bytes) {}
    // The next field: its number, its whole encoding (key included) and its payload.
    bool next(std::uint32_t& number, std::string_view& whole, std::string_view& payload) {
        if (at_ >= bytes_.size()) return false;
        const std::size_t start = at_;
        std::uint64_t key = 0;
        if (!varint(key)) return false;
        number = static_cast<std::uint32_t>(key >> 3);
        std::size_t begin = at_, length = 0;
        switch (key & 7) {
            case 0: {
                std::uint64_t ignored = 0;
                if (!varint(ignored)) return false;
                length = at_ - begin;
                break;
            }
            case 1: length = 8; break;
            case 5: length = 4; break;
            case 2: {
                std::uint64_t n = 0;
                if (!varint(n)) return false;
                begin = at_;
                length = static_cast<std::size_t>(n);
                break;
            }
            default: return false;
        }
        if (begin + length > bytes_.size()) return false;
        at_ = begin + length;
        whole = bytes_.substr(start, at_ - start);
        payload = bytes_.substr(begin, length);
        return true;
    }

private:
    bool varint(std::uint64_t& value) {
        value = 0;
        for (int shift = 0; shift < 64 && at_ < bytes_.size(); shift += 7) {
            const auto byte = static_cast<unsigned char>(bytes_[at_++]);
            value |= std::uint64_t{byte & 0x7fu} << shift;
            if (!(byte & 0x80)) return true;
        }
        return false;
    }
    std::string_view bytes_;
    std::size_t at_ = 0;
};

std::string sentencePieceIdentity(const std::string& proto) {
    std::string content;
    ProtoFields model(proto);
    std::uint32_t number = 0;
    std::string_view whole, payload;
    while (model.next(number, whole, payload)) {
        if (number != 2) {  // pieces, normaliser, denormaliser, anything else of the model: as stored
            content.append(whole);
            continue;
        }
        // TrainerSpec without what only says where and how fast it was trained:
        // input (1), model_prefix (2), num_threads (16).
        ProtoFields trainer(payload);
        std::uint32_t field = 0;
        std::string_view fieldWhole, fieldPayload;
        while (trainer.next(field, fieldWhole, fieldPayload))
            if (field != 1 && field != 2 && field != 16) content.append(fieldWhole);
    }
    const auto crc = crc32(0L, reinterpret_cast<const Bytef*>(content.data()), static_cast<uInt>(content.size()));
    return fmt::format("spm-{:08x}", crc);
}

class SentencePieceTokenizer final : public Tokenizer {
public:
    explicit SentencePieceTokenizer(const std::string& path) : module_(SentencePieceModule::get()) {
        std::ifstream in(path, std::ios::binary);
        if (!in) throw InputError(fmt::format("tokenizer '{}': no such file (give a SentencePiece .model or 'bytes')", path));
        std::stringstream bytes;
        bytes << in.rdbuf();
        const std::string proto = bytes.str();
        char error[512] = {};
        processor_ = module_.load(proto.data(), proto.size(), error, sizeof(error));
        if (!processor_) throw InputError(fmt::format("tokenizer '{}' is not a SentencePiece model: {}", path, error));
        if (module_.eosId(processor_) < 0)
            throw InputError(fmt::format("tokenizer '{}' has no end-of-sequence piece; kiln joins documents with EOS "
                                         "(train it with --eos_id >= 0)",
                                         path));
        // Sources prepared by kiln before identities were by content name the model by its file's CRC.
        const auto fileCrc = crc32(0L, reinterpret_cast<const Bytef*>(proto.data()), static_cast<uInt>(proto.size()));
        info_ = {sentencePieceIdentity(proto), static_cast<std::uint32_t>(module_.pieceSize(processor_)),
                 static_cast<std::uint32_t>(module_.eosId(processor_)), fmt::format("sentencepiece-{:08x}", fileCrc)};
    }
    ~SentencePieceTokenizer() override { module_.free(processor_); }
    SentencePieceTokenizer(const SentencePieceTokenizer&) = delete;
    SentencePieceTokenizer& operator=(const SentencePieceTokenizer&) = delete;

    const TokenizerInfo& info() const override { return info_; }

    void encode(std::string_view text, std::vector<std::uint32_t>& out) const override {
        char error[512] = {};
        const auto sink = [](void* context, const int* ids, std::size_t n) {
            static_cast<std::vector<std::uint32_t>*>(context)->insert(static_cast<std::vector<std::uint32_t>*>(context)->end(),
                                                                      ids, ids + n);
        };
        if (module_.encode(processor_, text.data(), text.size(), sink, &out, error, sizeof(error)) != 0)
            throw Error(std::string("SentencePiece encode failed: ") + error, ErrorScope::ThisRank);
    }

    std::string decode(const std::vector<std::uint32_t>& tokens) const override {
        std::string text;
        std::vector<int> run;
        // Decode document by document, showing EOS where it stands.
        auto flush = [&] {
            const auto sink = [](void* context, const char* t, std::size_t n) { static_cast<std::string*>(context)->append(t, n); };
            module_.decode(processor_, run.data(), run.size(), sink, &text);
            run.clear();
        };
        for (auto t : tokens) {
            if (t == info_.eosId) {
                flush();
                text += "\n<|eos|>\n";
            } else {
                run.push_back(static_cast<int>(t));
            }
        }
        flush();
        return text;
    }

    bool acceptsAnyBytes() const override { return false; }

private:
    const SentencePieceModule& module_;
    void* processor_ = nullptr;
    TokenizerInfo info_;
};

}  // namespace

std::unique_ptr<Tokenizer> openTokenizer(const std::string& spec) {
    if (spec == "bytes") return std::make_unique<ByteTokenizer>();
    if (spec.size() > 5 && spec.compare(spec.size() - 5, 5, ".json") == 0) return detail::openHuggingFaceTokenizer(spec);
    return std::make_unique<SentencePieceTokenizer>(spec);
}

std::string trainSentencePiece(const std::string& sampleFile, std::uint32_t vocabSize, const std::string& prefix) {
    if (!std::filesystem::path(prefix).parent_path().empty())
        std::filesystem::create_directories(std::filesystem::path(prefix).parent_path());
    // Unigram with byte fallback and identity normalisation: every input byte is
    // representable and decoding gives back exactly the text (newlines, runs of
    // spaces) that went in. A soft vocabulary limit: a small sample yields a
    // smaller vocabulary instead of failing (prep reports the size it got).
    const std::string args = fmt::format(
        "--input={} --model_prefix={} --vocab_size={} --model_type=unigram --character_coverage=0.9995 "
        "--byte_fallback=true --input_sentence_size=2000000 --shuffle_input_sentence=true "
        "--normalization_rule_name=identity --remove_extra_whitespaces=false --allow_whitespace_only_pieces=true "
        "--hard_vocab_limit=false "
        "--unk_id=0 --bos_id=1 --eos_id=2 --pad_id=-1 --minloglevel=2",
        sampleFile, prefix, vocabSize);
    char error[512] = {};
    if (SentencePieceModule::get().train(args.c_str(), error, sizeof(error)) != 0)
        throw InputError(fmt::format("training a SentencePiece model of {} pieces on {} failed: {}", vocabSize, sampleFile,
                                     error));
    return prefix + ".model";
}

bool isValidUtf8(std::string_view text) {
    std::size_t i = 0;
    const std::size_t n = text.size();
    while (i < n) {
        const auto c = static_cast<unsigned char>(text[i]);
        std::size_t extra = 0;
        std::uint32_t cp = 0;
        if (c < 0x80) {
            ++i;
            continue;
        } else if ((c & 0xE0) == 0xC0) {
            extra = 1;
            cp = c & 0x1F;
        } else if ((c & 0xF0) == 0xE0) {
            extra = 2;
            cp = c & 0x0F;
        } else if ((c & 0xF8) == 0xF0) {
            extra = 3;
            cp = c & 0x07;
        } else {
            return false;
        }
        for (std::size_t k = 1; k <= extra; ++k) {
            if (i + k >= n) return false;
            const auto cc = static_cast<unsigned char>(text[i + k]);
            if ((cc & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (cc & 0x3F);
        }
        // Overlong forms, surrogates and code points past U+10FFFF are invalid.
        if ((extra == 1 && cp < 0x80) || (extra == 2 && cp < 0x800) || (extra == 3 && cp < 0x10000) || cp > 0x10FFFF ||
            (cp >= 0xD800 && cp <= 0xDFFF))
            return false;
        i += extra + 1;
    }
    return true;
}

}  // namespace kiln::data
