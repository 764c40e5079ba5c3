#include "hf_normalizer.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/stringpiece.h>

namespace kiln::data::detail {

struct HuggingFaceNormalizer::Step {
    enum class Kind { Unicode, Prepend, Replace } kind = Kind::Unicode;
    const icu::Normalizer2* form = nullptr;  // Unicode
    std::string text, by;                    // Prepend: text; Replace: text by `by`
};

namespace {

using json = nlohmann::json;

const icu::Normalizer2* unicodeForm(const std::string& type) {
    UErrorCode status = U_ZERO_ERROR;
    const icu::Normalizer2* form = type == "NFC"    ? icu::Normalizer2::getNFCInstance(status)
                                   : type == "NFKC" ? icu::Normalizer2::getNFKCInstance(status)
                                   : type == "NFD"  ? icu::Normalizer2::getNFDInstance(status)
                                   : type == "NFKD" ? icu::Normalizer2::getNFKDInstance(status)
                                                    : nullptr;
    return U_SUCCESS(status) ? form : nullptr;
}

}  // namespace

HuggingFaceNormalizer::HuggingFaceNormalizer(const json& spec,
                                             const std::function<InputError(const std::string&)>& refuse) {
    const std::function<void(const json&)> read = [&](const json& s) {
        if (s.is_null()) return;
        const std::string type = s.is_object() ? s.value("type", std::string()) : std::string();
        if (type == "Sequence") {
            for (const auto& step : s.at("normalizers")) read(step);
            return;
        }
        auto step = std::make_unique<Step>();
        if (const auto* form = unicodeForm(type)) {
            step->form = form;
        } else if (type == "Prepend" && s.contains("prepend") && s["prepend"].is_string()) {
            step->kind = Step::Kind::Prepend;
            step->text = s["prepend"].get<std::string>();
        } else if (type == "Replace" && s.contains("pattern") && s["pattern"].contains("String") && s.contains("content")) {
            step->kind = Step::Kind::Replace;
            step->text = s["pattern"]["String"].get<std::string>();
            step->by = s["content"].get<std::string>();
            if (step->text.empty()) throw refuse(fmt::format("normalizer Replace of an empty string: {}", s.dump()));
        } else {
            throw refuse(fmt::format(
                "normalizer = {} (kiln applies NFC, NFKC, NFD, NFKD, Prepend, Replace of a string, and Sequences of them)",
                s.dump()));
        }
        steps_.push_back(std::move(step));
    };
    read(spec);
}

HuggingFaceNormalizer::~HuggingFaceNormalizer() = default;
HuggingFaceNormalizer::HuggingFaceNormalizer(HuggingFaceNormalizer&&) noexcept = default;
HuggingFaceNormalizer& HuggingFaceNormalizer::operator=(HuggingFaceNormalizer&&) noexcept = default;

bool HuggingFaceNormalizer::prepends() const {
    for (const auto& step : steps_)
        if (step->kind == Step::Kind::Prepend) return true;
    return false;
}

void HuggingFaceNormalizer::apply(std::string& text) const {
    for (const auto& step : steps_) {
        switch (step->kind) {
            case Step::Kind::Unicode: {
                UErrorCode status = U_ZERO_ERROR;
                const icu::StringPiece piece(text.data(), static_cast<std::int32_t>(text.size()));
                // Most text is already normalized: checked without a copy.
                if (step->form->isNormalizedUTF8(piece, status) && U_SUCCESS(status)) break;
                status = U_ZERO_ERROR;
                std::string normalized;
                icu::StringByteSink<std::string> sink(&normalized, static_cast<std::int32_t>(text.size()));
                step->form->normalizeUTF8(0, piece, sink, nullptr, status);
                if (U_SUCCESS(status)) text.swap(normalized);
                break;
            }
            case Step::Kind::Prepend:
                if (!text.empty()) text.insert(0, step->text);  // as tokenizers: an empty piece stays empty
                break;
            case Step::Kind::Replace: {
                std::string out;
                out.reserve(text.size() + text.size() / 4);
                std::size_t from = 0;
                for (std::size_t at; (at = text.find(step->text, from)) != std::string::npos; from = at + step->text.size())
                    out.append(text, from, at - from).append(step->by);
                out.append(text, from, std::string::npos);
                text.swap(out);
                break;
            }
        }
    }
}

}  // namespace kiln::data::detail
