#include "kiln/comm/heartbeat.hpp"

#include "kiln/base/log.hpp"
#include "kiln/comm/mpi_check.hpp"

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

namespace kiln::comm {
namespace {

using Clock = std::chrono::steady_clock;
std::atomic<Clock::rep> lastSign{0};
std::atomic<double> signLimit{0.0};
std::atomic<double> detectorTimeout{0.0};  // fault.hang_timeout_s, 0 when the detector is off

// Whether the training thread is overdue (and the pump should let the process fall silent).
bool trainingThreadOverdue() {
    const double limit = signLimit.load();
    if (limit <= 0) return false;
    const auto last = Clock::time_point(Clock::duration(lastSign.load()));
    return std::chrono::duration<double>(Clock::now() - last).count() > limit;
}

}  // namespace

void trainingThreadAlive() { lastSign = Clock::now().time_since_epoch().count(); }

double trainingThreadLimit() { return signLimit.load(); }

double heartbeatTimeout() { return detectorTimeout.load(); }

double communicationDeadline() {
    const double limit = signLimit.load();
    return limit > 0 ? limit + 2.0 * detectorTimeout.load() : 0.0;
}

void setTrainingThreadLimit(double seconds) {
    trainingThreadAlive();
    signLimit = seconds;
}

void enableHeartbeatDetector(double timeoutSeconds) {
    detectorTimeout = timeoutSeconds;
    // Read by MPI_Init from the environment; a value the user set wins.
    const std::string period = fmt::format("{}", timeoutSeconds / 4), timeout = fmt::format("{}", timeoutSeconds);
    for (const auto& [name, value] : {std::pair<const char*, std::string>{"OMPI_MCA_mpi_ft_detector", "true"},
                                      {"OMPI_MCA_mpi_ft_detector_thread", "false"},
                                      {"OMPI_MCA_mpi_ft_detector_period", period},
                                      {"OMPI_MCA_mpi_ft_detector_timeout", timeout}})
        setenv(name, value.c_str(), /*overwrite=*/0);
}

HeartbeatPump::HeartbeatPump(double timeoutSeconds) {
    KILN_MPI(MPI_Comm_dup(MPI_COMM_SELF, &quiet_));
    KILN_MPI(MPI_Comm_set_errhandler(quiet_, MPI_ERRORS_RETURN));
    // Open MPI's progress loop services its timed events (heartbeats) at most
    // every 10 ms of progress; a probe every 1/40 of the timeout (a tenth of a
    // period) keeps emission on time without spinning a core.
    thread_ = std::thread([this, timeoutSeconds] { run(timeoutSeconds / 40); });
}

HeartbeatPump::~HeartbeatPump() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    if (quiet_ != MPI_COMM_NULL) MPI_Comm_free(&quiet_);  // in a destructor: nothing to report to
}

void HeartbeatPump::run(double intervalSeconds) {
    const auto interval = std::chrono::duration<double>(intervalSeconds);
    bool silent = false;
    while (!stop_) {
        if (trainingThreadOverdue()) {
            if (!silent)
                std::fprintf(stderr, "kiln: warning [rank %d on %s]: the training thread has been away from the step "
                             "loop for over fault.step_timeout_s; this process stops answering heartbeats so that the "
                             "job declares it failed\n", log::rank(), log::host().c_str());
            silent = true;
            std::this_thread::sleep_for(interval);
            continue;
        }
        int flag = 0;
        MPI_Status status;
        // Errors (a failed peer elsewhere) are the training thread's to handle.
        MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, quiet_, &flag, &status);
        std::this_thread::sleep_for(interval);
    }
}

}  // namespace kiln::comm
