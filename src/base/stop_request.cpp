#include "kiln/base/stop_request.hpp"

#include <sys/stat.h>

#include <csignal>
#include <cstdlib>

namespace kiln {
namespace {

volatile std::sig_atomic_t requested = 0;

extern "C" void onStopSignal(int signal) { requested = signal; }

}  // namespace

void watchStopSignal() {
    struct sigaction action {};
    action.sa_handler = onStopSignal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;  // blocking calls go on; the loop looks at the flag between steps
    sigaction(SIGUSR1, &action, nullptr);
}

int stopSignal() { return requested; }

bool stopFileExists() {
    static const char* path = std::getenv("KILN_STOP_FILE");
    struct stat info {};
    return path != nullptr && *path != '\0' && ::stat(path, &info) == 0;
}

}  // namespace kiln
