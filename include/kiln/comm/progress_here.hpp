// A thread of kiln's inside MPI, while it waits there or makes any other call (every KILN_MPI call, polled
// waits, blocking collectives, agreements, shrinks): while any lives, that thread makes MPI's progress and the
// heartbeat pump (heartbeat.hpp) leaves MPI alone. Open MPI 5.0.10 handles a failure notice on whichever thread
// makes progress, and neither its agreement's failure callback (coll/ftagree walks the agreements under way without
// the lock its message handlers hold) nor its reliable broadcast's error path (opal_show_help's parser) is safe
// beside another thread's progress: both crashed healthy ranks (perf/RESULTS.md). The constructor waits for a
// probe of the pump's already under way to end.
#pragma once

namespace kiln::comm {

class ProgressHere {
public:
    ProgressHere();
    ~ProgressHere();
    ProgressHere(const ProgressHere&) = delete;
    ProgressHere& operator=(const ProgressHere&) = delete;
};

}  // namespace kiln::comm
