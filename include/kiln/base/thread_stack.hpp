// Where another thread of this process is: its call stack, taken by the thread
// itself in a signal handler (SIGURG, which nothing else in kiln's processes
// uses), symbolised afterwards by the caller. A process that ends itself for
// a thread that gave no sign of life says where that thread was, so that a hang
// is diagnosed from the run that showed it rather than from a rerun.
#pragma once

#include <pthread.h>

#include <string>
#include <vector>

namespace kiln::base {

// Call on the thread whose stack may be wanted later; it may be called again
// (the latest caller is the one asked). Installs the handler once.
void markStackTarget();
// Whether a thread has been marked.
bool stackTargetKnown();
// The marked thread's frames, innermost first ("function (library)"), at most
// `maxFrames`; empty when it did not answer within `waitSeconds` (a thread in
// an uninterruptible system call runs no handler until the call returns).
std::vector<std::string> stackOfTarget(double waitSeconds, int maxFrames = 24);

}  // namespace kiln::base
