#include "kiln/base/open_files.hpp"

#include <sys/resource.h>

#include <algorithm>

namespace kiln::base {

std::size_t ensureOpenFiles(std::size_t needed) {
    rlimit limit{};
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
    if (limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur >= needed) return limit.rlim_cur;
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max == RLIM_INFINITY ? needed : std::min<rlim_t>(limit.rlim_max, needed);
    if (setrlimit(RLIMIT_NOFILE, &raised) != 0) return limit.rlim_cur;
    return raised.rlim_cur;
}

}  // namespace kiln::base
