// How many CPU threads a rank computes with, and in which pool.
//
// libtorch has its own intra-op pool (OpenMP) and calls the system BLAS for
// matrix products; Debian's OpenBLAS keeps a second pool. Both busy-wait
// between calls, so with both pools at n threads on n cores every matrix
// product competes with spinning threads of the other pool: measured 2-3x
// slower steps than one thread (kiln and PyTorch alike, perf/RESULTS.md).
// When OpenBLAS is present its pool gets the rank's cores (matrix products
// dominate the step) and libtorch's pool one thread; with any other BLAS
// (MKL shares libtorch's OpenMP pool) libtorch's pool gets them.
#pragma once

namespace kiln::model {

struct ComputeThreads {
    int cores = 1;        // the rank's share of the host's cores
    int torchThreads = 1;  // libtorch's intra-op pool
    int blasThreads = 0;   // OpenBLAS's pool; 0 = no OpenBLAS found
};

// `requested` > 0: that many cores. 0: the CPUs this process may run on when
// a launcher bound it to fewer than the host has (mpirun --bind-to, Slurm's
// cpusets), else the host's CPUs divided by the ranks on the host
// (`ranksOnHost`); at least 1. Sets both pools and returns what was set.
ComputeThreads useComputeThreads(int requested, int ranksOnHost);

}  // namespace kiln::model
