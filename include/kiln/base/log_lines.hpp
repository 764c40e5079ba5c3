// The lines of kiln's log a user reads or acts on, by the tag they start with.
// docs/reference/log.md is printed from here (kiln reference log), and the
// reference test fails when the sources log an upper-case tag this list lacks.
#pragma once

#include <string>
#include <vector>

namespace kiln::log {

struct LogLine {
    std::string tag;      // how the line starts
    std::string example;  // a line as kiln writes it
    std::string meaning;  // what happened, and what to do about it
};

const std::vector<LogLine>& logLines();

}  // namespace kiln::log
