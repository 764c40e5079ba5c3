#include "kiln/comm/idle_wait.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>

#include <sys/syscall.h>
#include <unistd.h>

namespace kiln::comm {
namespace {

using Clock = std::chrono::steady_clock;
constexpr double kSpinSeconds = 200e-6;  // a wait this short is a message in flight: spin for it
constexpr double kLongestNap = 1e-3;
std::atomic<bool> ranksShareCores{false};
std::atomic<WaitMode> waitMode{WaitMode::Auto};

// Plain integers: read by sched_yield on any thread, from the first instruction of a process on.
thread_local int mpiDepth = 0;
thread_local Clock::rep mpiSince = 0;
thread_local unsigned long idleMoments = 0;

// The kernel's yield itself: sched_yield is kiln's own below.
void yieldCore() { syscall(SYS_sched_yield); }

}  // namespace

void setRanksShareCores(bool shared) { ranksShareCores = shared; }

bool ranksOutnumberCores(long ranksOnHost) {
    return ranksOnHost > static_cast<long>(std::max(1U, std::thread::hardware_concurrency()));
}

void setWaitMode(WaitMode mode) { waitMode = mode; }

WaitMode waitModeNamed(const std::string& name) {
    if (name == "spin") return WaitMode::Spin;
    if (name == "sleep") return WaitMode::Sleep;
    return WaitMode::Auto;  // the deck's schema admits only these three
}

bool sleepInLongWaits() {
    switch (waitMode.load(std::memory_order_relaxed)) {
        case WaitMode::Spin: return false;
        case WaitMode::Sleep: return true;
        case WaitMode::Auto: break;
    }
    return ranksShareCores.load(std::memory_order_relaxed);
}

void yieldInMpiWhereWaitsSleep() {
    bool sleeps = false;
    switch (waitMode.load()) {
        case WaitMode::Spin: break;
        case WaitMode::Sleep: sleeps = true; break;
        case WaitMode::Auto:
            if (const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE"))
                sleeps = ranksOutnumberCores(std::strtol(local, nullptr, 10));
            break;
    }
    if (sleeps) setenv("OMPI_MCA_mpi_yield_when_idle", "1", /*overwrite=*/0);
}

void passIdleMoment(double waitedSeconds) {
    ++idleMoments;
    if (waitedSeconds < kSpinSeconds || !sleepInLongWaits())
        yieldCore();
    else
        std::this_thread::sleep_for(std::chrono::duration<double>(std::min(kLongestNap, waitedSeconds / 10)));
}

unsigned long idleMomentsOnThisThread() { return idleMoments; }

void enteredMpi() {
    if (mpiDepth++ == 0) mpiSince = Clock::now().time_since_epoch().count();
}

void leftMpi() { --mpiDepth; }

}  // namespace kiln::comm

// Open MPI's progress loop yields through the PLT, so the executable's exported definition takes the place of
// libc's (src/CMakeLists.txt). Outside kiln's MPI calls (libtorch's threads, a spin lock, the pump) it is the
// kernel's yield, unchanged.
extern "C" int sched_yield() noexcept {
    using namespace kiln::comm;
    if (mpiDepth == 0) {
        yieldCore();
        return 0;
    }
    passIdleMoment(std::chrono::duration<double>(Clock::now() - Clock::time_point(Clock::duration(mpiSince))).count());
    return 0;
}
