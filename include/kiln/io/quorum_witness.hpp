// The quorum witness: which side of a job split by failures goes on.
//
// ULFM cannot tell a node that died from one that is cut off: each side of a
// cut shrinks to itself and would train on alone (split brain). Both sides
// still see the run's directory (checkpoints need a shared file system), so
// the file system breaks the tie: each recovery has one witness file, named
// by the epoch the job had when the recovery began, and link(2) creates it
// once (atomic on local file systems, NFS and Lustre alike). The side that
// created it goes on; every other side stops. Claiming again is idempotent:
// a side whose member is named in the witness holds it, so a second round of
// the same recovery (a rank of the side failed meanwhile) finds its own claim.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace kiln::io {

struct QuorumClaim {
    bool held = false;      // this side holds the witness
    std::string holders;    // the start-up ranks named in the witness ("" when it could not be read)
    std::string problem;    // why the file system gave no answer ("" when it did)
};

// The witness file of the recovery that began at `epoch` in `dir`.
std::filesystem::path quorumWitnessPath(const std::filesystem::path& dir, std::uint64_t epoch);

// Claims the witness of the recovery that began at `epoch` in `dir` for the
// side of start-up ranks `side` (ascending). One process of the side calls it.
QuorumClaim claimQuorum(const std::filesystem::path& dir, std::uint64_t epoch, const std::vector<int>& side);

// Whether the witness of the recovery that began at `epoch` exists and names a side without start-up rank
// `rank`: another side holds the job's quorum, and this process must write nothing.
bool quorumHeldElsewhere(const std::filesystem::path& dir, std::uint64_t epoch, int rank);

// Removes the witnesses of recoveries before `epoch` (the job has moved past them).
void removeOldWitnesses(const std::filesystem::path& dir, std::uint64_t epoch);

}  // namespace kiln::io
