// How many CPU threads a rank computes with. libtorch's intra-op pool and
// OpenBLAS's own pool are set together: left alone, OpenBLAS starts one
// thread per core in every process, so ranks sharing a host oversubscribe
// its cores (measured: 2 ranks on 2 cores ran 1.5x slower than their
// profile, taken by one process whose OpenBLAS used both cores).
#pragma once

namespace kiln::model {

// `requested` > 0: that many. 0: the host's cores divided by the ranks on
// the host (`ranksOnHost`), at least 1. Returns the count set.
int useComputeThreads(int requested, int ranksOnHost);

}  // namespace kiln::model
