#include "kiln/base/stop_request.hpp"

#include <csignal>

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

}  // namespace kiln
