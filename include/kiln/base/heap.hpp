// The C heap, tuned for a training loop. Every step frees and reallocates the
// same activation and gradient buffers; glibc's defaults hand large blocks
// back to the kernel (trim, mmap) and take them again on the next step, each
// time paying page faults and zeroing. Measured on the demo model: 1.2 M minor
// faults and 2.3 s of system time per 100 steps, 0.79x PyTorch eager's speed;
// with the heap kept, 1.0x (perf/bench_vs_pytorch.sh).
#pragma once

namespace kiln::base {

// Keeps freed memory in the process (no trim below 1 GiB of free top, mmap
// only for blocks of 32 MiB and more). Call first thing in main, before the
// first large allocation. Idempotent.
void keepHeapForTraining();

}  // namespace kiln::base
