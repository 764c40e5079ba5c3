// Turning one rank's error into every rank's: when only some ranks meet a
// problem (the ranks that read a corrupt chunk, the rank whose input has a bad
// record), all must stop alike, with the message of the one that met it.
#pragma once

#include <mpi.h>

#include <exception>
#include <string>

namespace kiln::comm {

// What went wrong in `work`, as a message (empty: nothing): what a rank
// brings to firstError, so that it never leaves the others waiting in a
// collective call it will not reach.
template <typename Work>
std::string problemOf(Work&& work) {
    try {
        work();
    } catch (const std::exception& e) {
        return e.what();
    }
    return "";
}

// Collective over `comm`: each rank brings its error message, empty for none.
// Returns the message of the lowest rank that brought one (empty when no rank
// did), the same on every rank.
std::string firstError(MPI_Comm comm, const std::string& mine);

// Collective over `comm` (MPI_COMM_NULL: this process alone): throws
// InputError (every rank's) with firstError's message, if any rank brought one.
void throwFirstError(MPI_Comm comm, const std::string& mine);

}  // namespace kiln::comm
