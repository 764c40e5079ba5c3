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
#include "kiln/base/fingerprint.hpp"

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::comm {

// The fingerprint itself is base's (it needs no MPI: the planner makes them); the comparison is here.
using Fingerprint = base::Fingerprint;

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
