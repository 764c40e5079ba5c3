#include "kiln/comm/error_agreement.hpp"

#include "kiln/base/error.hpp"
#include "kiln/comm/heartbeat.hpp"
#include "kiln/comm/mpi_check.hpp"

#include <limits>

namespace kiln::comm {

std::string firstError(MPI_Comm comm, const std::string& mine) {
    const PeerWait peers;  // blocking: the time spent waiting for the others is not this rank's hang
    int rank = 0;
    KILN_MPI(MPI_Comm_rank(comm, &rank));
    int first = mine.empty() ? std::numeric_limits<int>::max() : rank;
    KILN_MPI(MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, comm));
    if (first == std::numeric_limits<int>::max()) return "";
    std::string message = mine;
    int length = static_cast<int>(message.size());
    KILN_MPI(MPI_Bcast(&length, 1, MPI_INT, first, comm));
    message.resize(static_cast<std::size_t>(length));
    KILN_MPI(MPI_Bcast(message.data(), length, MPI_CHAR, first, comm));
    return message;
}

void throwFirstError(MPI_Comm comm, const std::string& mine) {
    const std::string message = comm == MPI_COMM_NULL ? mine : firstError(comm, mine);
    if (!message.empty()) throw InputError(message, ErrorScope::AllRanks);
}

}  // namespace kiln::comm
