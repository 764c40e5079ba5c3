// A scratch directory of this test process (the temporary directory, a prefix, the process id), removed with
// everything in it when the process exits normally: a suite run again and again must not fill /tmp. A process
// that crashes leaves its directory for the failure to be read.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

namespace kiln::test {

// `dir` removed at this process's normal exit.
inline void removeAtExit(const std::filesystem::path& dir) {
    struct Removed {
        std::vector<std::filesystem::path> dirs;
        ~Removed() {
            for (const auto& d : dirs) {
                std::error_code ignored;
                std::filesystem::remove_all(d, ignored);
            }
        }
    };
    static Removed removed;
    if (std::find(removed.dirs.begin(), removed.dirs.end(), dir) == removed.dirs.end()) removed.dirs.push_back(dir);
}

inline std::filesystem::path processScratch(const std::string& prefix) {
    auto dir = std::filesystem::temp_directory_path() / (prefix + "-" + std::to_string(::getpid()));
    removeAtExit(dir);
    return dir;
}

}  // namespace kiln::test
