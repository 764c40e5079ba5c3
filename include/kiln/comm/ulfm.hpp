// ULFM (MPI fault tolerance) behind plain functions. Compiled without ULFM,
// `ulfmCompiled()` is false and the repair functions throw.
#pragma once

#include <mpi.h>
#if KILN_HAVE_ULFM
#include <mpi-ext.h>
#endif

#include <vector>

namespace kiln::comm {

// The MPI library has the ULFM extension.
bool ulfmCompiled();
// ... and this job was launched with fault tolerance on (mpirun --with-ft ulfm).
bool ulfmActive();

// Interrupts every pending and future operation on `comm` on every rank.
void revoke(MPI_Comm comm);
// A new communicator of the survivors of `comm`, in the same rank order.
MPI_Comm shrink(MPI_Comm comm);
// Fault-tolerant agreement: the bitwise AND of `flag` over the survivors;
// every survivor gets the same answer even if more ranks fail meanwhile.
// `failureSeen`, when given, says whether the agreement reported a failed
// participant to this rank (not necessarily to every rank: agree on it).
int agree(MPI_Comm comm, int flag, bool* failureSeen = nullptr);
// Every rank of `comm` leaves a phase with the same outcome: a collective can succeed on some ranks and fail on
// others (a rank leaves an all-gather once it holds every part, before a dead peer's neighbour does), so that
// either all go on or all recover at the same point. `ok`: this rank's calls of the phase succeeded; `bits`
// (below 2^30): what else the ranks decide together. Under ULFM an agreement (a rank that saw a failure revokes
// `comm` first), else an all-reduce. Throws ProcFailedError ("a rank failed while `what`") unless every rank
// was ok; returns the bitwise AND of `bits`.
int agreeOrThrow(MPI_Comm comm, bool ok, const char* what, int bits = 1);
// The ranks of `before` (ascending) that are not in `after`: after a shrink,
// the failed set every survivor agrees on.
std::vector<int> ranksMissingFrom(MPI_Comm before, MPI_Comm after);
// Waits up to `seconds` until this rank's MPI knows every rank of `ranks` (of `comm`) has failed, without
// communicating (ULFM's list of the failures it noticed). False if some rank still seemed alive then.
bool awaitFailures(MPI_Comm comm, const std::vector<int>& ranks, double seconds);

}  // namespace kiln::comm
