#include "kiln/base/fingerprint.hpp"

#include <fmt/format.h>

#include <cstring>

namespace kiln::base {
namespace {

// FNV-1a over bytes, then a final mix so that fields differing in one bit
// spread over the whole word.
std::uint64_t hashBytes(std::uint64_t h, const void* data, std::size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < n; ++i) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

std::uint64_t mix(std::uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

constexpr std::uint64_t kSeed = 0xcbf29ce484222325ull;
constexpr std::size_t kShown = 48;  // characters of a value in an error

std::string cut(std::string text) {
    if (text.size() > kShown) text = text.substr(0, kShown - 3) + "...";
    return text;
}

}  // namespace

Fingerprint::Fingerprint(std::string decision) : decision_(std::move(decision)), digest_(kSeed) {}

Fingerprint& Fingerprint::addHash(std::string_view field, std::uint64_t hash, std::string shown) {
    std::uint64_t h = hashBytes(kSeed, field.data(), field.size());
    h = mix(hashBytes(h, &hash, sizeof hash));
    names_.emplace_back(field);
    values_.push_back(cut(std::move(shown)));
    hashes_.push_back(h);
    digest_ = mix(digest_ ^ h) + names_.size();
    return *this;
}

Fingerprint& Fingerprint::add(std::string_view field, std::string_view text) {
    return addHash(field, hashBytes(kSeed, text.data(), text.size()) ^ text.size(), std::string(text));
}

Fingerprint& Fingerprint::add(std::string_view field, double value) {
    std::uint64_t bits = 0;
    std::memcpy(&bits, &value, sizeof bits);
    return addHash(field, bits, fmt::format("{}", value));  // shortest text that reads back as the same double
}

Fingerprint& Fingerprint::addInteger(std::string_view field, std::uint64_t bits, bool negative) {
    return addHash(field, bits, negative ? fmt::format("{}", static_cast<std::int64_t>(bits)) : fmt::format("{}", bits));
}

std::string Fingerprint::shown(std::size_t fields) const {
    std::string out = "[";
    for (std::size_t i = 1; i < names_.size() && i <= fields; ++i) out += (i > 1 ? " " : "") + values_[i];
    if (names_.size() > fields + 1) out += " ...";
    return out + "]";
}

}  // namespace kiln::base
