// A request to stop cleanly, by signal: Slurm sends one ahead of a job's time
// limit (sbatch --signal=B:USR1@SECONDS, forwarded to every rank by mpirun).
// The training loop checks it at every step boundary; all ranks agree, write a
// checkpoint and exit with the requeue status, so nothing is lost at the limit.
#pragma once

namespace kiln {

// Installs the handler for SIGUSR1 (once; harmless to call again).
void watchStopSignal();
// The signal that asked to stop, or 0.
int stopSignal();

}  // namespace kiln
