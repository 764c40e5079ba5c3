// A process that ends as a failed one does, without its words in flight (issue 64, item 4).
//
// A side of a cut that stands down ends itself with SIGKILL. The kernel then
// closes its TCP connections gracefully: what Open MPI had queued while the link
// was down (its failure detector's verdicts on the ranks it stopped hearing)
// stays in the sockets and is delivered once the link heals, and a healthy rank
// that reads "you were declared dead" is aborted by Open MPI. A connection closed
// with a zero linger is reset instead, and what it held is dropped.
#pragma once

namespace kiln::comm {

// Makes every TCP connection of this process reset, not drain, when it closes (at the process's end).
// Returns how many were set. Safe to call from any thread; touches nothing but socket options.
int resetConnectionsOnExit();

}  // namespace kiln::comm
