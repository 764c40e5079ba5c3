// Terminal output. `info` speaks for the job (one process: rank 0 at
// start-up, the new rank 0 after a failure took it); `warn` speaks for one
// process and names it by its start-up rank and host.
#pragma once

#include <fmt/format.h>

#include <string>

namespace kiln::log {

// Set once after MPI start-up; before that every process counts as rank 0.
void setIdentity(int rank, std::string host);
int rank();
const std::string& host();
// Whether `info` lines of this process are printed (set by recovery when rank 0 is lost).
void speakForJob(bool speaks);
bool speaksForJob();

void writeInfo(const std::string& line);
void writeWarn(const std::string& line);

template <typename... Args>
void info(fmt::format_string<Args...> format, Args&&... args) {
    if (speaksForJob()) writeInfo(fmt::format(format, std::forward<Args>(args)...));
}

// Detail of one process that users rarely act on (which MPI call of which
// rank saw a failure, which rank left with its node): printed, as a warning,
// only with KILN_VERBOSE=1 in the environment. The job's own line says what
// happened and what happens next.
bool verbose();
template <typename... Args>
void detail(fmt::format_string<Args...> format, Args&&... args) {
    if (verbose()) writeWarn(fmt::format(format, std::forward<Args>(args)...));
}
template <typename... Args>
void warn(fmt::format_string<Args...> format, Args&&... args) {
    writeWarn(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace kiln::log
