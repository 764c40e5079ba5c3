// Agreed, never assumed (DESIGN.md, invariant 7). A decision that every rank
// computes for itself (the profile a plan is made from, the templates, the
// layout, the batch split, the cursor) is fingerprinted where it is made and
// checked with one small collective before anyone acts on it. Ranks that
// computed different answers would otherwise wait for each other in
// different collectives forever; with the check they all stop with one error
// that names the decision, the ranks that differ and the first field where
// they do.
#pragma once

#include "kiln/base/error.hpp"

#include <mpi.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace kiln::comm {

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

// Ranks that computed a replicated decision differently: raised on every
// rank alike (the check is collective), so the job ends with one message.
class DisagreementError : public Error {
public:
    explicit DisagreementError(std::string message) : Error(std::move(message), ErrorScope::AllRanks) {}
};

// Collective over `comm`: one all-reduce of two 64-bit words when every rank
// agrees. Otherwise every rank throws DisagreementError naming the decision,
// the ranks that differ from the most common answer (ranks of `comm`, or
// start-up ranks when `members` maps them), and the first field that
// differs with both values. A failed peer throws ProcFailedError as any
// collective does.
void requireAgreement(MPI_Comm comm, const Fingerprint& mine, const std::vector<int>& members = {});

// For a check folded into a collective the caller makes anyway (the step's
// all-gather): the words of a disagreement among `digests` (one per rank),
// or "" when all are equal. Every rank computes the same text.
std::string disagreementAmong(const std::string& decision, const std::vector<std::uint64_t>& digests,
                              const std::vector<int>& members = {});

// A 64-bit digest split into two doubles that hold it exactly (32 bits each),
// for the step's all-gather of doubles, and back.
void splitDigest(std::uint64_t digest, double& high, double& low);
std::uint64_t joinDigest(double high, double low);

}  // namespace kiln::comm
