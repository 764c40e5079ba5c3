#pragma once

#include <exception>

namespace kiln::apps {

// Prints `e` once for the job (an error all ranks share) or with the rank that
// raised it, and returns the exit code. A one-rank error in a multi-rank job
// aborts the job, since the other ranks may wait on this one forever.
int reportError(const std::exception& e);

}  // namespace kiln::apps
