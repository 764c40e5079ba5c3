#include "kiln/base/log_lines.hpp"

namespace kiln::log {

const std::vector<LogLine>& logLines() {
    static const std::vector<LogLine> lines = {
        {"step", "step      1/12  loss 5.5469  lr 6.00e-04  |g| 4.581  9.5k tok/s  MFU 41.2%  wait 0.0%  ETA 0m01s  f 2",
         "progress, one line per step (or per run.log_every): loss, learning rate, gradient norm, throughput, the "
         "share of time waiting for data (above a few % the loader is the bottleneck: raise data.prefetch or "
         "data.read_threads), time left, and the node failures the layout survives now. A mixture of experts adds "
         "'balance 1.018  z 1.94' after the loss: the routers' load-balancing loss (1: balanced; a climb toward "
         "model.experts is a router collapsing onto few experts: raise model.router_aux_loss) and z-loss, means "
         "over the blocks (kiln diag --plot draws each expert's load). MFU (model FLOPs utilization over the run's "
         "steps so far) appears when a peak is known (the MFU line at start-up)"},
        {"kiln: error", "kiln: error on rank 0 (node-7): deck input/my.ini line 12: ...",
         "a bad input, named with its file, line or key; nothing was lost. Fix it and run again"},
        {"MPI", "  MPI        Open MPI v5.0.10", "the MPI library the job runs with; ULFM needs Open MPI 5"},
        {"ranks", "  ranks      8 on 4 nodes (emulated: cluster.ranks_per_node = 2)", "the ranks and the nodes kiln found (cluster.ranks_per_node "
                                                               "emulates nodes on one machine)"},
        {"faults", "  faults     ULFM active; fault.f = 2 (up to 2 simultaneous node failures survived without restart, ...)",
         "whether failures can be survived: ULFM off means the first failure ends the job (launch with mpirun --with-ft "
         "ulfm); also fault.f lowered to what the nodes allow, and the MPI transport (pml ob1 is the one Open MPI's "
         "ULFM supports; any other is warned about by name: docs/install.md), with a warning when fault.hang_timeout_s is under "
         "30 s on a job across hosts (a lossy link can then make Open MPI's detector declare healthy ranks failed)"},
        {"data", "  data       mix licenses 100.0%; global batch 16 x 65 tokens = 1040 tokens/step",
         "the data mix and the global batch as the loader will deliver them"},
        {"MFU", "  MFU        against 989 TFLOP/s a rank: NVIDIA H100 80GB HBM3 (H100, dense bf16)",
         "the peak each rank's MFU is measured against (train.peak_tflops, or the GPU's by its name), or that no MFU "
         "is reported because none is known; the step lines then show MFU"},
        {"model", "  model      gpt2, 4 blocks, d_model 64, 4 heads, MLP 256, vocabulary 257, 0.24 M parameters; cpu fp32, ...",
         "the model's shape, parameter count and threads per rank"},
        {"start-up", "  start-up   8 ranks, seconds on the slowest rank per phase: load 2.39, deck 0.01, mpi_init 1.56, ...",
         "seconds of each start-up phase; the same figures are the `startup` event of diag.h5"},
        {"LAUNCH_LOST", "  LAUNCH_LOST the previous attempt ended without kiln's end record (host node-3 lost): PRTE has lost ...",
         "the attempt before this one was ended by the launcher (Open MPI 5.0's runtime cannot survive a host lost "
         "whole) or by kiln at a deadline (a host without power or cut off): this requeued attempt resumed from the "
         "latest checkpoint and recorded it in diag.h5's /failures. Check the host named; the jobscript excluded it"},
        {"FAILURE", "  FAILURE step 7: failed rank 3 (node 1 retired); 6 ranks on 3 nodes remain; ... recovered in 15.4 ms",
         "nodes failed and the survivors regrouped; the step is replayed, no data is lost or repeated. Nothing to do "
         "unless failures repeat on one node"},
        {"STRAGGLER", "  STRAGGLER before step 5: node 1 computed 5.03x slower than its pipeline's planned bottleneck allows ...",
         "a node slow enough to cost more than it gives was retired from the pipelines; it returns when its probes say "
         "it recovered. Check the node"},
        {"NUMERICS", "  NUMERICS step 12: loss nan (non_finite); not applied, the step runs again from the same state",
         "a step's loss or gradient norm was not finite or spiked (numerics.*): it was not applied; the next NUMERICS "
         "line says what its rerun showed: a node retired for silent corruption (check its hardware), a batch skipped "
         "or a stop (exit 3: look at the batch with kiln data, or at the model), or a fault in the gradient sums"},
        {"ROLLBACK", "  ROLLBACK before step 300: every survivor holds step-00000200.h5 (0.84 s); steps 200 to 299 are trained again",
         "a comparison outvoted a copy that the steps since the copies last agreed may have used (the NUMERICS line "
         "before says which): every survivor went back to the last checkpoint, compared before it was written, and "
         "trains those steps again, so the run ends with the failure-free weights (numerics.rollback)"},
        {"TEARDOWN", "  TEARDOWN the lost attempt recorded rank 5 as failed after host node-3 was lost; ...",
         "the attempt the launcher lost recorded deaths on hosts that lived: Open MPI's runtime ends the whole job once "
         "it loses a host's daemon, so those /failures rows now say cause 'teardown'. Only the host LAUNCH_LOST names "
         "needs looking at"},
        {"RETURN", "  RETURN before step 12: node 1 recovered: ...", "a retired straggler's node is in the pipelines again"},
        {"TOLERANCE", "  TOLERANCE fault tolerance now 1 simultaneous node failure (fault.f = 2): ...",
         "how many simultaneous node failures the layout now survives, when it changes; below fault.f, another failure "
         "may stop the run (it checkpoints and exits 75 for a requeue): admit nodes or let Slurm requeue"},
        {"ADMIT", "  ADMIT after step 30: 1 node admitted (node-9; start-up ranks 6 to 7) in 210.4 ms; ...", "nodes admitted into the running job (RUN_DIR/admit), or why an "
                                                             "admission was refused"},
        {"REBALANCE", "  REBALANCE before step 4: pipeline 1 at least 8.04x slower than its share assumed ...",
         "the batch split between pipelines changed to follow their measured speeds; the data and the loss are the same"},
        {"SPEED", "  SPEED ...",
         "a node slower than planned, not slow enough to change the layout"},
        {"STOP", "  STOP after step 120 on a stop request (SIGUSR1 or KILN_STOP_FILE: ...): a requeued job resumes from it",
         "the run stopped early (Slurm time limit, a signal, more failures than f) after writing a checkpoint; exit "
         "status 75 asks Slurm to requeue, and the next attempt resumes"},
        {"eval", "  eval after step 5: held-out loss 4.6152, perplexity 101.01 (2 batches, 2048 tokens, 0.10 s)",
         "a held-out evaluation (eval.every); also the /eval table of diag.h5"},
    };
    return lines;
}

}  // namespace kiln::log
