#include "kiln/base/startup_clock.hpp"

#include <chrono>
#include <fstream>
#include <mutex>
#include <sstream>

#include <unistd.h>

namespace kiln::base {
namespace {

using Clock = std::chrono::steady_clock;

// Seconds since this process started: /proc's start time (clock ticks after
// boot) against the uptime; 0 where /proc is not there.
double processAge() {
    std::ifstream stat("/proc/self/stat"), uptime("/proc/uptime");
    std::string text, field;
    double up = 0.0;
    if (!std::getline(stat, text) || !(uptime >> up)) return 0.0;
    // Fields after the command name (in parentheses, which may hold spaces): state is field 3, starttime 22.
    std::istringstream rest(text.substr(text.rfind(')') + 2));
    for (int k = 3; k < 22 && rest >> field; ++k) {
    }
    unsigned long long ticks = 0;
    if (!(rest >> ticks)) return 0.0;
    const double started = double(ticks) / double(::sysconf(_SC_CLK_TCK));
    return up > started ? up - started : 0.0;
}

struct Phases {
    std::mutex mutex;
    bool begun = false;
    Clock::time_point last;
    std::vector<std::pair<std::string, double>> list;
};

Phases& phases() {
    static Phases p;
    return p;
}

}  // namespace

void startupPhase(const std::string& name) {
    Phases& p = phases();
    std::lock_guard lock(p.mutex);
    const auto now = Clock::now();
    const double seconds = p.begun ? std::chrono::duration<double>(now - p.last).count() : processAge();
    p.begun = true;
    p.last = now;
    for (auto& [n, s] : p.list)
        if (n == name) {
            s += seconds;
            return;
        }
    p.list.emplace_back(name, seconds);
}

std::vector<std::pair<std::string, double>> startupPhases() {
    Phases& p = phases();
    std::lock_guard lock(p.mutex);
    return p.list;
}

}  // namespace kiln::base
