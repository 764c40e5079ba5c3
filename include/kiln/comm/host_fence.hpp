// Fencing a failed rank on this host without a raw process id (issue 65).
//
// A survivor that shares a failed rank's host kills it (SIGKILL), in case it
// only hung (fault/recovery.cpp). By then the failed process may have exited
// and its id been given to an unrelated process; kill(pid) would hit that one.
// A pidfd opened while the job starts refers to the job's process alone for as
// long as it is held: a signal through it reaches that process or, once it has
// exited, nothing.
#pragma once

#include <utility>
#include <vector>

namespace kiln::comm {

// Holds a pidfd for each (process id, start-up rank) of this job on this host not held yet.
// Called where the job's processes are known alive: at start-up and when nodes join.
void holdHostMates(const std::vector<std::pair<long, int>>& mates);

// SIGKILL to the process of start-up rank `rank` through its pidfd. False when
// none is held (another host, or a kernel without pidfds) or it has exited.
bool killHostMate(int rank);

}  // namespace kiln::comm
