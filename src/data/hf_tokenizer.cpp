// BPE as Hugging Face `tokenizers` runs it:
//   1. added tokens (<|endoftext|> ...) are cut out of the text first and
//      become their own ids;
//   2. each piece between them is normalized (hf_normalizer.hpp: NFC for
//      Qwen, Prepend and Replace for Llama 2's SentencePiece style);
//   3. the pre-tokenizer splits it: with its regex (GPT-2's for a plain
//      ByteLevel, the Split pattern of a Sequence [Split, ByteLevel] as
//      Llama 3, Qwen and SmolLM have), matches and the gaps between them
//      alike; or Metaspace (Mistral): spaces become "▁", one before the
//      first piece, split before each "▁" or not at all; or none;
//   4. byte-level: each piece's bytes become GPT-2's printable byte
//      alphabet; SentencePiece style: its characters are the symbols, and
//      one not in the vocabulary becomes its bytes' <0xNN> tokens (byte
//      fallback) or the unknown token;
//   5. the merges are applied lowest rank first (bpe_merges.hpp; the whole
//      piece first when the model ignores merges for pieces in the
//      vocabulary).
// The regex is PCRE2's with Unicode properties, as Debian ships it;
// `tokenizers` uses Oniguruma, whose \s, \p{L} and \p{N} classes are the same
// Unicode ones (held to `tokenizers` by tests/cli/hf_tokenizer.sh).
#include "hf_tokenizer.hpp"

#include "bpe_merges.hpp"
#include "hf_normalizer.hpp"

#include "kiln/base/error.hpp"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <pcre2.h>
#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <mutex>
#include <unordered_map>

namespace kiln::data::detail {
namespace {

using json = nlohmann::json;

// GPT-2's ByteLevel pre-tokenizer regex.
constexpr const char* kByteLevelPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

std::string utf8(std::uint32_t cp) {
    std::string s;
    if (cp < 0x80) {
        s += static_cast<char>(cp);
    } else if (cp < 0x800) {
        s += static_cast<char>(0xC0 | (cp >> 6));
        s += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        s += static_cast<char>(0xE0 | (cp >> 12));
        s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        s += static_cast<char>(0x80 | (cp & 0x3F));
    }
    return s;
}

// GPT-2's table: printable bytes stand for themselves, the others for 256 + n.
std::vector<std::string> byteAlphabet() {
    std::vector<int> printable;
    for (int b = '!'; b <= '~'; ++b) printable.push_back(b);
    for (int b = 0xA1; b <= 0xAC; ++b) printable.push_back(b);
    for (int b = 0xAE; b <= 0xFF; ++b) printable.push_back(b);
    std::vector<std::string> table(256);
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
        const bool self = std::find(printable.begin(), printable.end(), b) != printable.end();
        table[static_cast<std::size_t>(b)] = utf8(self ? static_cast<std::uint32_t>(b) : static_cast<std::uint32_t>(256 + extra++));
    }
    return table;
}

// The UTF-8 characters of `s`, each as its bytes.
// Bytes of the UTF-8 character that `lead` begins.
std::size_t utf8Length(unsigned char lead) { return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4; }

std::vector<std::string> characters(const std::string& s) {
    std::vector<std::string> out;
    for (std::size_t i = 0; i < s.size();) {
        const auto c = static_cast<unsigned char>(s[i]);
        const std::size_t n = utf8Length(c);
        out.push_back(s.substr(i, n));
        i += n;
    }
    return out;
}

class Regex {
public:
    Regex(const std::string& pattern, const std::string& where) {
        int error = 0;
        PCRE2_SIZE at = 0;
        code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF | PCRE2_UCP, &error,
                              &at, nullptr);
        if (!code_) {
            PCRE2_UCHAR message[256];
            pcre2_get_error_message(error, message, sizeof message);
            throw InputError(fmt::format("{}: its pattern does not compile at character {} ({}): {}", where, at,
                                         reinterpret_cast<char*>(message), pattern));
        }
        pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE);  // where PCRE2 has a JIT; interpreted otherwise
        match_ = pcre2_match_data_create_from_pattern(code_, nullptr);
    }
    ~Regex() {
        pcre2_match_data_free(match_);
        pcre2_code_free(code_);
    }
    Regex(const Regex&) = delete;
    Regex& operator=(const Regex&) = delete;
    // The pieces of `text`: every match, and every gap between matches.
    void split(std::string_view text, std::vector<std::string_view>& out) const {
        std::size_t at = 0, gap = 0;
        const auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
        while (at < text.size()) {
            // The text's UTF-8 is checked by the first match; every later one would check it all again.
            const int rc = pcre2_match(code_, subject, text.size(), at, at == 0 ? 0 : PCRE2_NO_UTF_CHECK, match_, nullptr);
            if (rc < 0) break;
            const PCRE2_SIZE* span = pcre2_get_ovector_pointer(match_);
            if (span[1] == span[0]) {  // an empty match: move on by one character
                at = span[0] + 1;
                while (at < text.size() && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) ++at;
                continue;
            }
            if (span[0] > gap) out.push_back(text.substr(gap, span[0] - gap));
            out.push_back(text.substr(span[0], span[1] - span[0]));
            at = gap = span[1];
        }
        if (gap < text.size()) out.push_back(text.substr(gap));
    }

private:
    pcre2_code* code_ = nullptr;
    pcre2_match_data* match_ = nullptr;
};

class HuggingFaceBpe final : public Tokenizer {
public:
    explicit HuggingFaceBpe(const std::string& path) : path_(path), bytes_(byteAlphabet()) {
        std::ifstream in(path);
        if (!in) throw InputError(fmt::format("tokenizer '{}': cannot open for reading", path));
        json j;
        try {
            j = json::parse(in);
        } catch (const json::exception& e) {
            throw InputError(fmt::format("tokenizer '{}': not JSON ({})", path, e.what()));
        }
        const auto refuse = [&](const std::string& what) {
            return InputError(fmt::format("tokenizer '{}': {}; kiln encodes BPE tokenizers, byte-level (GPT-2, Llama 3, "
                                          "Qwen, SmolLM, OLMo) or SentencePiece-style (Llama 2, Mistral, TinyLlama)",
                                          path, what));
        };
        const auto& model = j.value("model", json::object());
        if (model.value("type", std::string()) != "BPE")
            throw refuse(fmt::format("model.type = {}", model.value("type", json("missing")).dump()));
        for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
            if (model.contains(key) && model[key].is_string() && !model[key].get<std::string>().empty())
                throw refuse(fmt::format("model.{} = {}", key, model[key].dump()));
        if (model.contains("dropout") && !model["dropout"].is_null()) throw refuse("model.dropout is set");
        normalizer_ = HuggingFaceNormalizer(j.value("normalizer", json()), refuse);
        normalizerPrepends_ = normalizer_.prepends();
        ignoreMerges_ = model.value("ignore_merges", false);
        byteFallback_ = model.value("byte_fallback", false);
        fuseUnknown_ = model.value("fuse_unk", false);
        readPreTokenizer(j.value("pre_tokenizer", json()), refuse);

        std::uint32_t vocabSize = 0;
        for (const auto& [token, id] : model.at("vocab").items()) {
            vocab_[token] = id.get<std::uint32_t>();
            vocabSize = std::max(vocabSize, id.get<std::uint32_t>() + 1);
        }
        std::uint32_t rank = 0;
        for (const auto& merge : model.at("merges")) {
            // "a b" (older files) or ["a", "b"].
            std::string a, b;
            if (merge.is_string()) {
                const auto text = merge.get<std::string>();
                const auto space = text.find(' ');
                a = text.substr(0, space);
                b = space == std::string::npos ? "" : text.substr(space + 1);
            } else {
                a = merge.at(0).get<std::string>();
                b = merge.at(1).get<std::string>();
            }
            const auto ia = vocab_.find(a), ib = vocab_.find(b), ab = vocab_.find(a + b);
            if (ia == vocab_.end() || ib == vocab_.end() || ab == vocab_.end())
                throw refuse(fmt::format("model.merges[{}] = {} joins pieces that are not all in model.vocab", rank,
                                         merge.dump()));
            merges_.emplace(mergeKey(ia->second, ib->second), {rank++, ab->second});
        }
        for (const auto& added : j.value("added_tokens", json::array())) {
            const auto id = added.at("id").get<std::uint32_t>();
            added_.push_back({added.at("content").get<std::string>(), id});
            vocabSize = std::max(vocabSize, id + 1);
        }
        // Longest first: where two start at one place, the longer one is meant.
        std::sort(added_.begin(), added_.end(), [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
        pieces_.resize(vocabSize);
        for (const auto& [token, id] : vocab_) pieces_[id] = token;
        for (const auto& [content, id] : added_) pieces_[id] = content;
        for (std::size_t b = 0; b < 256; ++b) {
            // Byte-level: the byte's character; SentencePiece style: its <0xNN> token (byte fallback).
            const std::string name = byteLevel_ ? bytes_[b] : fmt::format("<0x{:02X}>", b);
            byteOf_[name] = static_cast<unsigned char>(b);
            const auto id = vocab_.find(name);
            byteIds_[b] = id == vocab_.end() ? kNone : id->second;
        }
        // Characters up to U+07FF (one or two UTF-8 bytes) by code point.
        if (!byteLevel_) {
            shortIds_.assign(0x800, kNone);
            for (std::uint32_t cp = 0; cp < 0x800; ++cp)
                if (const auto id = vocab_.find(utf8(cp)); id != vocab_.end()) shortIds_[cp] = id->second;
        }
        if (const auto unk = model.value("unk_token", json()); unk.is_string()) {
            const auto id = vocab_.find(unk.get<std::string>());
            if (id == vocab_.end()) throw refuse(fmt::format("model.unk_token = {} is not in model.vocab", unk.dump()));
            unknownId_ = id->second;
        }

        info_.vocabSize = vocabSize;
        info_.eosId = findEos(j);
        // The identity: what decides the ids (vocabulary, merges, added tokens, pre-tokenizer, EOS), not the file.
        uLong crc = crc32(0L, Z_NULL, 0);
        const auto add = [&](const std::string& s) { crc = crc32(crc, reinterpret_cast<const Bytef*>(s.data()), static_cast<uInt>(s.size())); };
        for (std::uint32_t id = 0; id < vocabSize; ++id) add(pieces_[id] + '\n');
        add(model.at("merges").dump());
        add(j.value("pre_tokenizer", json()).dump());
        add(fmt::format("ignore_merges {} eos {}", ignoreMerges_, info_.eosId));
        // Added later (issue 53): only when set, so that the identity of a tokenizer without them stays as it was.
        if (!normalizer_.none()) add("normalizer " + j["normalizer"].dump());
        if (!byteLevel_) add(fmt::format("byte_fallback {} unk {} fuse {}", byteFallback_, unknownId_, fuseUnknown_));
        info_.id = fmt::format("hf-bpe-{:08x}", crc);
    }

    const TokenizerInfo& info() const override { return info_; }
    bool acceptsAnyBytes() const override { return false; }  // the regex runs on UTF-8 text

    void encode(std::string_view text, std::vector<std::uint32_t>& out) const override {
        std::lock_guard<std::mutex> lock(mutex_);  // the regex's match data and the cache
        std::size_t from = 0;
        while (from < text.size()) {
            std::size_t at = text.size(), length = 0;
            std::uint32_t id = 0;
            for (const auto& [content, tokenId] : added_) {
                const auto found = text.find(content, from);
                if (found != std::string_view::npos && (found < at || (found == at && content.size() > length))) {
                    at = found;
                    length = content.size();
                    id = tokenId;
                }
            }
            encodeText(text.substr(from, at - from), from == 0, out);
            if (at == text.size()) break;
            out.push_back(id);
            from = at + length;
        }
    }

    std::string decode(const std::vector<std::uint32_t>& tokens) const override {
        std::string text;
        for (const auto id : tokens) {
            if (id >= pieces_.size()) continue;
            const auto& piece = pieces_[id];
            const bool added = std::any_of(added_.begin(), added_.end(), [&](const auto& a) { return a.second == id; });
            if (added) {
                text += piece;
                continue;
            }
            if (byteLevel_) {
                for (const auto& c : characters(piece)) {
                    const auto b = byteOf_.find(c);
                    text += b == byteOf_.end() ? c : std::string(1, static_cast<char>(b->second));
                }
            } else if (const auto b = byteOf_.find(piece); b != byteOf_.end()) {
                text += static_cast<char>(b->second);
            } else {
                for (std::size_t at = 0, next; at < piece.size(); at = next + kSpaceMark.size()) {
                    next = piece.find(kSpaceMark, at);
                    text.append(piece, at, next == std::string::npos ? std::string::npos : next - at);
                    if (next == std::string::npos) break;
                    text += ' ';
                }
            }
        }
        // SentencePiece style: the space put before the first piece is not the text's.
        if (!byteLevel_ && prependsSpace_ && !text.empty() && text.front() == ' ') text.erase(0, 1);
        return text;
    }

private:
    template <class Refuse>
    void readPreTokenizer(const json& p, const Refuse& refuse) {
        const auto byteLevel = [&](const json& b, bool inSequence) {
            addPrefixSpace_ = b.value("add_prefix_space", false);
            if (b.value("use_regex", true)) {
                if (inSequence) throw refuse("pre_tokenizer: a ByteLevel with use_regex after another splitter");
                regex_ = std::make_unique<Regex>(kByteLevelPattern, path_ + ": the ByteLevel pre-tokenizer");
            }
        };
        if (p.is_object() && p.value("type", std::string()) == "ByteLevel") return byteLevel(p, false);
        byteLevel_ = false;
        if (p.is_null()) {  // the normalized piece is one word (Llama 2: Prepend and Replace did the spaces)
            prependsSpace_ = normalizerPrepends_;
            return;
        }
        if (p.is_object() && p.value("type", std::string()) == "Metaspace") {
            metaspace_ = true;
            if (p.value("replacement", std::string(kSpaceMark)) != kSpaceMark)
                throw refuse(fmt::format("pre_tokenizer Metaspace replacement = {} (kiln reads \"▁\")", p["replacement"].dump()));
            // prepend_scheme in tokenizers 0.15 and later; add_prefix_space (true: always) before.
            const std::string scheme =
                p.value("prepend_scheme", p.value("add_prefix_space", true) ? std::string("always") : std::string("never"));
            if (scheme != "always" && scheme != "first" && scheme != "never")
                throw refuse(fmt::format("pre_tokenizer Metaspace prepend_scheme = {}", p["prepend_scheme"].dump()));
            prepend_ = scheme == "always" ? Prepend::Always : scheme == "first" ? Prepend::First : Prepend::Never;
            splitOnSpaces_ = p.value("split", true);
            prependsSpace_ = prepend_ != Prepend::Never;
            return;
        }
        byteLevel_ = true;
        if (!p.is_object() || p.value("type", std::string()) != "Sequence")
            throw refuse(fmt::format("pre_tokenizer = {}", p.dump()));
        const auto& steps = p.at("pretokenizers");
        if (steps.size() != 2 || steps[0].value("type", std::string()) != "Split" ||
            steps[1].value("type", std::string()) != "ByteLevel")
            throw refuse(fmt::format("pre_tokenizer = {} (kiln reads ByteLevel, or Sequence [Split, ByteLevel])", p.dump()));
        const auto& split = steps[0];
        if (split.value("behavior", std::string()) != "Isolated" || split.value("invert", false) ||
            !split.at("pattern").contains("Regex"))
            throw refuse(fmt::format("pre_tokenizer Split = {} (kiln reads a Regex pattern, Isolated, not inverted)",
                                     split.dump()));
        regex_ = std::make_unique<Regex>(split["pattern"]["Regex"].get<std::string>(), path_ + ": pre_tokenizer Split");
        byteLevel(steps[1], true);
    }

    // The EOS kiln ends documents with: tokenizer_config.json's eos_token
    // beside the file, else the added token of the usual names.
    std::uint32_t findEos(const json& j) const {
        std::string name;
        const auto config = std::filesystem::path(path_).parent_path() / "tokenizer_config.json";
        if (std::ifstream in(config); in) {
            const auto c = json::parse(in, nullptr, false);
            if (!c.is_discarded() && c.contains("eos_token")) {
                const auto& e = c["eos_token"];
                name = e.is_string() ? e.get<std::string>() : e.is_object() ? e.value("content", std::string()) : "";
            }
        }
        const std::vector<std::string> usual = {"<|endoftext|>", "<|end_of_text|>", "</s>"};
        for (const auto& candidate : name.empty() ? usual : std::vector<std::string>{name})
            for (const auto& [content, id] : added_)
                if (content == candidate) return id;
        throw InputError(fmt::format("tokenizer '{}': no end-of-text token: {} names none of its added tokens{}", path_,
                                     name.empty() ? "it has none of <|endoftext|>, <|end_of_text|>, </s>, and no "
                                                    "tokenizer_config.json beside it"
                                                  : "tokenizer_config.json's eos_token " + name,
                                     j.contains("added_tokens") ? "" : " (it has no added_tokens)"));
    }

    // A piece of text between added tokens (`atStart`: the text's first), normalized, pre-tokenized, merged.
    void encodeText(std::string_view text, bool atStart, std::vector<std::uint32_t>& out) const {
        if (text.empty()) return;
        if (!normalizer_.none()) {
            normalized_.assign(text);
            normalizer_.apply(normalized_);
            text = normalized_;
        }
        if (!byteLevel_) return encodeSentencePieceStyle(text, atStart, out);
        std::string prefixed;
        if (addPrefixSpace_ && text.front() != ' ') {
            prefixed.assign(1, ' ');
            prefixed.append(text);
            text = prefixed;
        }
        pieces_scratch_.clear();
        if (regex_) {
            regex_->split(text, pieces_scratch_);
        } else {
            pieces_scratch_.push_back(text);
        }
        for (const auto piece : pieces_scratch_) encodePiece(piece, out);
    }

    // Metaspace (or none): spaces as "▁", one put first as the scheme says, the pieces split before each "▁"
    // (or the whole text one piece).
    void encodeSentencePieceStyle(std::string_view text, bool atStart, std::vector<std::uint32_t>& out) const {
        if (metaspace_) {
            spaced_.clear();
            const bool prepend = prepend_ == Prepend::Always || (prepend_ == Prepend::First && atStart);
            // As tokenizers: after the spaces are replaced, a piece that begins with "▁" gets no other.
            if (prepend && text.front() != ' ' && text.substr(0, kSpaceMark.size()) != kSpaceMark) spaced_ += kSpaceMark;
            for (const char c : text) {
                if (c == ' ')
                    spaced_ += kSpaceMark;
                else
                    spaced_ += c;
            }
            text = spaced_;
        }
        if (!metaspace_ || !splitOnSpaces_) return encodePiece(text, out);
        std::size_t from = 0;
        for (std::size_t at = text.find(kSpaceMark, 1); at != std::string_view::npos; at = text.find(kSpaceMark, at + 1)) {
            encodePiece(text.substr(from, at - from), out);
            from = at;
        }
        encodePiece(text.substr(from), out);
    }

    // One piece's symbols: byte-level, its bytes' characters; SentencePiece style, its characters, each not in
    // the vocabulary as its bytes' <0xNN> tokens (byte fallback) or the unknown token (consecutive ones fused
    // into one when the model says so), or dropped as tokenizers drops it when the model has neither.
    void symbolsOf(std::string_view piece, std::vector<std::uint32_t>& ids) const {
        if (byteLevel_) {
            for (const unsigned char b : piece) {
                if (byteIds_[b] == kNone)
                    throw InputError(fmt::format("tokenizer '{}': byte {} is not in its vocabulary (a byte-level "
                                                 "vocabulary holds all 256)",
                                                 path_, int(b)));
                ids.push_back(byteIds_[b]);
            }
            return;
        }
        bool lastUnknown = false;
        for (std::size_t i = 0; i < piece.size();) {
            const std::size_t n = std::min(piece.size() - i, utf8Length(static_cast<unsigned char>(piece[i])));
            const std::string_view character = piece.substr(i, n);
            if (const auto id = characterId(character); id != kNone) {
                ids.push_back(id);
                lastUnknown = false;
            } else if (byteFallback_ && std::all_of(character.begin(), character.end(),
                                                    [&](char c) { return byteIds_[static_cast<unsigned char>(c)] != kNone; })) {
                for (const char c : character) ids.push_back(byteIds_[static_cast<unsigned char>(c)]);
                lastUnknown = false;
            } else if (unknownId_ != kNone) {
                if (!(fuseUnknown_ && lastUnknown)) ids.push_back(unknownId_);
                lastUnknown = true;
            }
            i += n;
        }
    }

    // A character's own id (kNone: not in the vocabulary): the two-byte and shorter ones from a table, the
    // others looked up (a document's every character passes here).
    std::uint32_t characterId(std::string_view character) const {
        const auto c0 = static_cast<unsigned char>(character[0]);
        if (character.size() == 1) return shortIds_[c0];
        if (character.size() == 2) return shortIds_[((c0 & 0x1Fu) << 6) | (static_cast<unsigned char>(character[1]) & 0x3Fu)];
        key_.assign(character);
        const auto id = vocab_.find(key_);
        return id == vocab_.end() ? kNone : id->second;
    }

    void encodePiece(std::string_view piece, std::vector<std::uint32_t>& out) const {
        // Words are cached; a SentencePiece-style document sent whole is not worth keeping.
        const bool cacheable = piece.size() <= 256;
        if (cacheable) {
            key_.assign(piece.data(), piece.size());
            if (const auto cached = cache_.find(key_); cached != cache_.end()) {
                out.insert(out.end(), cached->second.begin(), cached->second.end());
                return;
            }
        }
        std::vector<std::uint32_t> ids;
        if (ignoreMerges_) {
            std::string mapped;
            if (byteLevel_)
                for (const unsigned char b : piece) mapped += bytes_[b];
            else
                mapped.assign(piece);
            if (const auto whole = vocab_.find(mapped); whole != vocab_.end()) ids.push_back(whole->second);
        }
        if (ids.empty()) {
            symbolsOf(piece, ids);
            applyMerges(ids, merges_);
        }
        out.insert(out.end(), ids.begin(), ids.end());
        if (cacheable && cache_.size() < (1u << 20)) cache_.emplace(std::string(piece), std::move(ids));
    }

    std::string path_;
    std::vector<std::string> bytes_;  // byte -> its character
    std::unordered_map<std::string, unsigned char> byteOf_;
    std::unordered_map<std::string, std::uint32_t> vocab_;
    static constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();
    MergeTable merges_;
    std::uint32_t byteIds_[256] = {};  // each byte's own id
    std::vector<std::pair<std::string, std::uint32_t>> added_;
    std::vector<std::string> pieces_;  // id -> its string
    std::unique_ptr<Regex> regex_;  // none: ByteLevel without regex alone (the text is one piece)
    bool addPrefixSpace_ = false, ignoreMerges_ = false;
    HuggingFaceNormalizer normalizer_{nullptr, {}};
    // SentencePiece style (no ByteLevel): characters are the symbols.
    static constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // "▁", U+2581
    bool byteLevel_ = true, byteFallback_ = false, fuseUnknown_ = false;
    std::uint32_t unknownId_ = kNone;
    std::vector<std::uint32_t> shortIds_;  // code point (< 0x800) -> its id
    bool metaspace_ = false, splitOnSpaces_ = false;
    enum class Prepend { Always, First, Never } prepend_ = Prepend::Never;
    bool prependsSpace_ = false, normalizerPrepends_ = false;  // what decode takes off the front
    TokenizerInfo info_;
    mutable std::mutex mutex_;
    mutable std::vector<std::string_view> pieces_scratch_;
    mutable std::string key_, normalized_, spaced_;
    mutable std::unordered_map<std::string, std::vector<std::uint32_t>> cache_;  // piece (its bytes) -> ids
};

}  // namespace

std::unique_ptr<Tokenizer> openHuggingFaceTokenizer(const std::string& path) { return std::make_unique<HuggingFaceBpe>(path); }

}  // namespace kiln::data::detail
