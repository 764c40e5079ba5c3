#include "kiln/comm/connection_reset.hpp"

#include <dirent.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cstdlib>

namespace kiln::comm {

int resetConnectionsOnExit() {
    DIR* fds = opendir("/proc/self/fd");
    if (fds == nullptr) return 0;
    int set = 0;
    const int listing = dirfd(fds);
    while (const dirent* entry = readdir(fds)) {
        char* end = nullptr;
        const long fd = std::strtol(entry->d_name, &end, 10);
        if (end == entry->d_name || *end != '\0' || fd == listing) continue;
        struct stat info {};
        if (fstat(static_cast<int>(fd), &info) != 0 || !S_ISSOCK(info.st_mode)) continue;
        int domain = 0, type = 0;
        socklen_t size = sizeof(int);
        if (getsockopt(static_cast<int>(fd), SOL_SOCKET, SO_DOMAIN, &domain, &size) != 0) continue;
        size = sizeof(int);
        if (getsockopt(static_cast<int>(fd), SOL_SOCKET, SO_TYPE, &type, &size) != 0) continue;
        if ((domain != AF_INET && domain != AF_INET6) || type != SOCK_STREAM) continue;
        const linger reset{1, 0};
        if (setsockopt(static_cast<int>(fd), SOL_SOCKET, SO_LINGER, &reset, sizeof reset) == 0) ++set;
    }
    closedir(fds);
    return set;
}

}  // namespace kiln::comm
