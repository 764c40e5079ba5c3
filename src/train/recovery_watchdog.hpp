// A recovery's deadline (issue 64). Open MPI 5.0's agreement and shrink can
// wait forever when a host lost power or was cut off (no FIN, no RST; its
// daemon unreachable). A survivor stuck there must not be ended alone, as a
// hung rank would be: every survivor is stuck in the same collective, and the
// one that ends first would leave the rest to write rows that call healthy
// ranks failed. So a recovery that has not finished within its deadline ends
// the whole job for a requeue (io::endJobForRequeue). Private to train/.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

namespace kiln::train {

class RecoveryWatchdog {
public:
    // Armed for `seconds` (0: never fires) on the recovery of the failure at `step`.
    RecoveryWatchdog(double seconds, std::uint64_t step);
    ~RecoveryWatchdog();  // disarmed: the recovery finished, or unwound
    RecoveryWatchdog(const RecoveryWatchdog&) = delete;
    RecoveryWatchdog& operator=(const RecoveryWatchdog&) = delete;

private:
    std::mutex mutex_;
    std::condition_variable done_;
    bool finished_ = false;
    std::thread thread_;
};

}  // namespace kiln::train
