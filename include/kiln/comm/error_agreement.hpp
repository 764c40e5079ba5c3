// Turning one rank's error into every rank's: when only some ranks meet a
// problem (the ranks that read a corrupt chunk, the rank whose input has a bad
// record), all must stop alike, with the message of the one that met it.
#pragma once

#include <mpi.h>

#include <string>

namespace kiln::comm {

// Collective over `comm`: each rank brings its error message, empty for none.
// Returns the message of the lowest rank that brought one (empty when no rank
// did), the same on every rank.
std::string firstError(MPI_Comm comm, const std::string& mine);

}  // namespace kiln::comm
