#include "kiln/comm/host_fence.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include <csignal>
#include <map>
#include <mutex>

namespace kiln::comm {
namespace {

std::mutex mutex;
std::map<int, int> held;  // start-up rank -> pidfd

int openPidfd(long pid) {
#ifdef SYS_pidfd_open
    return static_cast<int>(::syscall(SYS_pidfd_open, static_cast<pid_t>(pid), 0));
#else
    (void)pid;
    return -1;
#endif
}

}  // namespace

void holdHostMates(const std::vector<std::pair<long, int>>& mates) {
    std::lock_guard<std::mutex> lock(mutex);
    for (const auto& [pid, rank] : mates) {
        if (held.count(rank)) continue;
        const int fd = openPidfd(pid);
        if (fd >= 0) held[rank] = fd;
    }
}

bool killHostMate(int rank) {
    std::lock_guard<std::mutex> lock(mutex);
    const auto it = held.find(rank);
    if (it == held.end()) return false;
#ifdef SYS_pidfd_send_signal
    return ::syscall(SYS_pidfd_send_signal, it->second, SIGKILL, nullptr, 0) == 0;
#else
    return false;
#endif
}

}  // namespace kiln::comm
