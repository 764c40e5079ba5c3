// A decision's fingerprint: its named fields, hashed in order, so that two ranks' answers compare in one word
// and a difference is named where it starts. Computing one needs no MPI; comparing them across ranks is
// comm/decision_check.hpp's.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace kiln::base {

// Named fields of one decision, hashed in the order they are added. Values
// are hashed by their bits (two doubles agree only when they are the same
// double), so a fingerprint says "computed the same", not "close".
class Fingerprint {
public:
    explicit Fingerprint(std::string decision);

    Fingerprint& add(std::string_view field, std::string_view text);
    Fingerprint& add(std::string_view field, const char* text) { return add(field, std::string_view(text)); }
    Fingerprint& add(std::string_view field, const std::string& text) { return add(field, std::string_view(text)); }
    Fingerprint& add(std::string_view field, double value);
    Fingerprint& add(std::string_view field, bool value) { return add(field, std::uint64_t{value ? 1u : 0u}); }
    template <typename Int, std::enable_if_t<std::is_integral_v<Int>, int> = 0>
    Fingerprint& add(std::string_view field, Int value) {
        return addInteger(field, static_cast<std::uint64_t>(value), std::is_signed_v<Int> && value < 0);
    }
    // A list, as one field (its length included).
    template <typename T>
    Fingerprint& add(std::string_view field, const std::vector<T>& values) {
        Fingerprint inner{std::string(field)};
        inner.add("count", values.size());
        for (std::size_t i = 0; i < values.size(); ++i) inner.add(std::to_string(i), values[i]);
        return addHash(field, inner.digest(), inner.shown(8));
    }

    const std::string& decision() const { return decision_; }
    std::uint64_t digest() const { return digest_; }
    std::size_t size() const { return names_.size(); }
    const std::string& name(std::size_t i) const { return names_[i]; }
    std::uint64_t fieldHash(std::size_t i) const { return hashes_[i]; }
    // Field i's value in words (cut short): for the error only.
    const std::string& value(std::size_t i) const { return values_[i]; }

private:
    Fingerprint& addInteger(std::string_view field, std::uint64_t bits, bool negative);
    Fingerprint& addHash(std::string_view field, std::uint64_t hash, std::string shown);
    // The first `fields` values, for a list's words.
    std::string shown(std::size_t fields) const;

    std::string decision_;
    std::vector<std::string> names_, values_;
    std::vector<std::uint64_t> hashes_;
    std::uint64_t digest_;
};

}  // namespace kiln::base
