// A request to admit new nodes into a running job: the file `admit` in the
// run's directory (`echo 2 > RUN_DIR/admit`). Rank 0 looks for it at every
// step boundary, as for a stop request, and removes it once read; the number
// travels to every rank in the step's sums. The first word is the number of
// nodes (1 when the file is empty); an optional second word, a
// comma-separated list of hosts, says where to start them (MPI_Comm_spawn's
// "host"; without it, wherever the MPI runtime has free slots).
#pragma once

#include <filesystem>
#include <string>

namespace kiln::fault {

struct AdmitRequest {
    int nodes = 0;        // 0: no request (or a malformed one: see problem)
    std::string hosts;    // empty: the runtime chooses
    std::string problem;  // why a file that was there was refused
};

// The request in `path`, taken: the file is removed.
AdmitRequest takeAdmitRequest(const std::filesystem::path& path);

}  // namespace kiln::fault
