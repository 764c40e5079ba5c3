// The loader's current batch on every rank, or one error for all: only the ranks whose slice holds a corrupt
// chunk meet it, and the others must not go on into the step's collectives without them.
#pragma once

#include "kiln/data/loader.hpp"

#include <mpi.h>

#include <string>

namespace kiln::data {

struct AgreedBatch {
    const Batch* batch = nullptr;  // this rank's, when no rank met an error
    std::string error;             // the lowest such rank's message, the same on every rank; empty: none
};

// Collective over `comm`: reads `loader.current()` and agrees on the first rank's data error (InputError).
AgreedBatch currentBatchOrFirstError(DataLoader& loader, MPI_Comm comm);

}  // namespace kiln::data
