// A request to stop cleanly: SIGUSR1 to a rank, or the file named by
// KILN_STOP_FILE appearing (the jobscript creates it when Slurm signals the
// time limit ahead: sbatch --signal=B:USR1@SECONDS). A file, because Slurm may
// signal a job seconds after it starts, before every rank could install a
// handler, and a signal without one would kill the rank. The training loop
// checks at every step boundary; all ranks agree, write a checkpoint and exit
// with the requeue status, so nothing is lost at the limit.
#pragma once

namespace kiln {

// Installs the handler for SIGUSR1 (once; harmless to call again).
void watchStopSignal();
// The signal that asked to stop, or 0.
int stopSignal();
// Whether KILN_STOP_FILE is set and names a file that exists (a file system
// call: one rank asks, the others learn it from the step's sums).
bool stopFileExists();

}  // namespace kiln
