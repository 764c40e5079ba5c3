#include "recovery_watchdog.hpp"

#include "kiln/io/launch_record.hpp"

#include <fmt/format.h>

#include <chrono>

namespace kiln::train {

RecoveryWatchdog::RecoveryWatchdog(double seconds, std::uint64_t step) {
    if (!(seconds > 0)) return;
    thread_ = std::thread([this, seconds, step] {
        std::unique_lock<std::mutex> lock(mutex_);
        if (done_.wait_for(lock, std::chrono::duration<double>(seconds), [this] { return finished_; })) return;
        const std::string why = fmt::format(
            "requeue: the recovery from the failure in step {} made no progress in {:.0f} s (an agreement or shrink "
            "that Open MPI never completes: a host that lost power or was cut off?)",
            step, seconds);
        io::endJobForRequeue(why);
    });
}

RecoveryWatchdog::~RecoveryWatchdog() {
    if (!thread_.joinable()) return;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        finished_ = true;
    }
    done_.notify_all();
    thread_.join();
}

}  // namespace kiln::train
