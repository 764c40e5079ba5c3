// Terminal output. `info` speaks for the job (rank 0 only); `warn` and
// `rankLine` speak for one rank and say which.
#pragma once

#include <fmt/core.h>

#include <string>

namespace kiln::log {

// Set once after MPI start-up; before that every process counts as rank 0.
void setIdentity(int rank, std::string host);
int rank();
const std::string& host();

void writeInfo(const std::string& line);
void writeWarn(const std::string& line);

template <typename... Args>
void info(fmt::format_string<Args...> format, Args&&... args) {
    if (rank() == 0) writeInfo(fmt::format(format, std::forward<Args>(args)...));
}

template <typename... Args>
void warn(fmt::format_string<Args...> format, Args&&... args) {
    writeWarn(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace kiln::log
