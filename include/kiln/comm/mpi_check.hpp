// Every MPI call goes through KILN_MPI so that a failure becomes a typed
// exception naming the call, rank, host and source line. A failed peer or a
// revoked communicator (ULFM) becomes ProcFailedError, which recovery catches.
#pragma once

#include "kiln/comm/progress_here.hpp"

#include <mpi.h>

namespace kiln::comm {

// Throws MpiError / ProcFailedError when `rc` is not MPI_SUCCESS.
void checkMpi(int rc, const char* call, const char* file, int line);

// True when `errorClass` means a peer failed or the communicator was revoked.
bool isProcessFailure(int errorClass);

}  // namespace kiln::comm

// The call runs with the heartbeat pump out of MPI (progress_here.hpp): the temporary lives until the check ends.
#define KILN_MPI(call) ::kiln::comm::checkMpi((::kiln::comm::ProgressHere(), (call)), #call, __FILE__, __LINE__)
