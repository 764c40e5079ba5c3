// Rank 0's vector on every rank of a communicator: its length first, then its
// elements (the length is not known to the others beforehand).
#pragma once

#include "kiln/comm/mpi_check.hpp"

#include <mpi.h>

#include <cstdint>
#include <vector>

namespace kiln::comm {

template <typename T>
void broadcastVector(MPI_Comm comm, std::vector<T>& values, MPI_Datatype type) {
    std::int64_t size = static_cast<std::int64_t>(values.size());
    KILN_MPI(MPI_Bcast(&size, 1, MPI_INT64_T, 0, comm));
    values.resize(static_cast<std::size_t>(size));
    KILN_MPI(MPI_Bcast(values.data(), static_cast<int>(size), type, 0, comm));
}

}  // namespace kiln::comm
