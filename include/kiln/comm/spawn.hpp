// Processes that join a running job. Its ranks start them with
// MPI_Comm_spawn (which works under ULFM with the Open MPI kiln ships, also
// after failures: tests/fault/spawn_after_failure.c) and merge with them into
// one intracommunicator, the job's ranks first, the new ones after.
#pragma once

#include <mpi.h>

#include <string>

namespace kiln::comm {

// Whether this process was started by a running job (it has a parent).
bool spawnedIntoJob();

// Collective over `control`: starts `processes` copies of this process's own
// command line (executable, arguments, working directory) and returns the
// merged communicator. `hosts` (significant at rank 0; empty: wherever the
// runtime has slots) is a comma-separated list of hosts to start them on.
// Throws MpiError when the runtime cannot start them, ProcFailedError when a
// rank of `control` failed.
MPI_Comm spawnJoiners(MPI_Comm control, int processes, const std::string& hosts);
// How long spawnJoiners may take before this process ends as a failed node:
// 4 x fault.hang_timeout_s, at least 60 s (MPI_Comm_spawn cannot notice a
// member of the job that fails while the new processes connect).
double spawnDeadlineSeconds();

// On a spawned process: the communicator merged with the job that started it.
MPI_Comm mergeWithJob();
// On a spawned process, before MPI_Init (its spawner sets the deadline in its
// environment; elsewhere nothing): past spawnDeadlineSeconds() without
// mergeWithJob() returning, the process ends as a failed node.
void armJoinDeadline();

}  // namespace kiln::comm
