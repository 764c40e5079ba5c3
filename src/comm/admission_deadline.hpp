// A deadline for the waits of an admission that cannot notice a failed peer
// (comm/spawn.hpp): past it, this process ends as a failed node does, so
// that the others go on without it instead of waiting with it.
#pragma once

#include "kiln/base/watchdog.hpp"

#include <csignal>
#include <cstdio>
#include <string>

namespace kiln::comm {

class AdmissionDeadline {
public:
    // `who` names this process, `what` the wait.
    AdmissionDeadline(double seconds, std::string who, std::string what)
        : watchdog_(seconds, [seconds, who = std::move(who), what = std::move(what)] {
              std::fprintf(stderr, "kiln: %s: %s made no progress for %.0f s (MPI_Comm_spawn, MPI_Init and the connect "
                           "cannot notice a failed peer); this process ends as a failed node, so that the job goes on "
                           "without it\n",
                           who.c_str(), what.c_str(), seconds);
              std::fflush(stderr);
              std::raise(SIGKILL);
          }) {}

private:
    base::Watchdog watchdog_;
};

}  // namespace kiln::comm
