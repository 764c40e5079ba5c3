#include "kiln/comm/heartbeat.hpp"

#include "kiln/base/log.hpp"
#include "kiln/base/thread_stack.hpp"
#include "kiln/comm/idle_wait.hpp"
#include "kiln/comm/mpi_check.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstring>
#include <map>
#include <mutex>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <utility>

#include <signal.h>
#include <unistd.h>

namespace kiln::comm {
namespace {

using Clock = std::chrono::steady_clock;
std::atomic<Clock::rep> lastSign{0};
std::atomic<double> signLimit{0.0};
std::atomic<double> lastLimit{0.0};     // the last limit > 0: how long a neighbour may stay stopped
std::atomic<int> peerWaits{0};          // blocking MPI calls under way on the training thread
std::atomic<int> backgroundWrites{0};   // checkpoint writes under way on other threads
std::atomic<int> progressingElsewhere{0};  // ProgressHere scopes alive
std::atomic<bool> pumpProbing{false};      // the pump is inside its MPI_Iprobe
std::mutex neighboursMutex;
std::vector<std::pair<long, int>> neighbours;  // watchHost()
int ownRank = -1;
std::atomic<double> detectorTimeout{0.0};  // fault.hang_timeout_s, 0 when the detector is off

// Whether the training thread is overdue (and the pump should let the process fall silent).
bool trainingThreadOverdue() {
    const double limit = signLimit.load();
    if (limit <= 0 || peerWaits.load() > 0 || backgroundWrites.load() > 0) return false;
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
    if (seconds > 0) {
        lastLimit = seconds;
        base::markStackTarget();  // set on the training thread: the pump can say where it hung
    }
}

BackgroundWrite::BackgroundWrite() { ++backgroundWrites; }
BackgroundWrite::~BackgroundWrite() {
    trainingThreadAlive();  // the training thread's wait on it was not its absence
    --backgroundWrites;
}

// Sequentially consistent, both sides: a scope begun while the pump decided to probe sees pumpProbing set and
// waits out that probe (a non-blocking call), or the pump sees the scope and does not probe.
ProgressHere::ProgressHere() {
    ++progressingElsewhere;
    while (pumpProbing.load()) std::this_thread::yield();
    enteredMpi();  // from here its idle polls nap where waits sleep (idle_wait.hpp)
}
ProgressHere::~ProgressHere() {
    leftMpi();
    --progressingElsewhere;
}

PeerWait::PeerWait() { ++peerWaits; }
PeerWait::~PeerWait() {
    trainingThreadAlive();  // the wait was not the thread's absence
    --peerWaits;
}

void watchHost(int self, std::vector<std::pair<long, int>> others) {
    const std::lock_guard<std::mutex> lock(neighboursMutex);
    ownRank = self;
    neighbours = std::move(others);
}

void enableHeartbeatDetector(double timeoutSeconds) {
    detectorTimeout = timeoutSeconds;
    // Read by MPI_Init from the environment; a value the user set wins. At most a second between heartbeats:
    // Open MPI's detector looks at its ring a tenth of a period apart, and a survivor's MPI_Finalize waits for
    // the rank it observes, so with a quarter of a 60 s timeout every process ending after a failure waited up to
    // 1.5 s for its observer to move past the dead rank. A heartbeat a second is a few bytes.
    // The detector's verdict reaches every rank through the ranks' own reliable broadcast: without it Open MPI
    // 5.0.10 passes the verdict to its runtime, which tells only the observer's host, and a host gone silent
    // (power, a cut link) left the other hosts' ranks waiting for it in the agreement until the step's deadline
    // ended the job for a requeue (docs/faults.md).
    const std::string period = fmt::format("{}", std::min(timeoutSeconds / 4, 1.0)),
                      timeout = fmt::format("{}", timeoutSeconds);
    for (const auto& [name, value] : {std::pair<const char*, std::string>{"OMPI_MCA_mpi_ft_detector", "true"},
                                      {"OMPI_MCA_mpi_ft_propagator_with_rbcast", "true"},
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
    {
        std::lock_guard<std::mutex> lock(wakeMutex_);
        stop_ = true;
    }
    // Every process's exit waited out the pump's pause (a quarter second) before: woken, it ends now.
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
    if (quiet_ != MPI_COMM_NULL) MPI_Comm_free(&quiet_);  // in a destructor: nothing to report to
}

void HeartbeatPump::run(double intervalSeconds) {
    // Neighbours are looked at a few times a second, whatever the heartbeat period.
    const auto interval = std::chrono::duration<double>(std::min(intervalSeconds, 0.25));
    while (!stop_) {
        if (trainingThreadOverdue()) {
            const auto stack = base::stackOfTarget(/*waitSeconds=*/2.0);
            std::fprintf(stderr, "kiln: error [rank %d on %s]: the training thread gave no sign of life for over %.1f s "
                         "(the step's deadline: fault.step_deadline times the median step, at least "
                         "fault.step_deadline_floor_s; or fault.step_timeout_s), outside MPI: a hung file or device call. "
                         "This process ends (SIGKILL) so that the job recovers without it. The thread was in:%s\n",
                         log::rank(), log::host().c_str(), signLimit.load(),
                         stack.empty() ? " (no answer within 2 s: an uninterruptible system call)" : "");
            for (std::size_t i = 0; i < stack.size(); ++i)
                std::fprintf(stderr, "kiln:   [rank %d] #%zu %s\n", log::rank(), i, stack[i].c_str());
            std::fflush(stderr);
            ::kill(::getpid(), SIGKILL);
        }
        endStoppedNeighbours();
        int flag = 0;
        MPI_Status status;
        // Errors (a failed peer elsewhere) are the training thread's to handle.
        pumpProbing = true;
        if (progressingElsewhere.load() == 0) MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, quiet_, &flag, &status);
        pumpProbing = false;
        std::unique_lock<std::mutex> lock(wakeMutex_);
        wake_.wait_for(lock, interval, [this] { return stop_.load(); });
    }
}

namespace {

// Whether process `pid` is stopped (SIGSTOP; state T in /proc, not t: a debugger's).
bool stopped(long pid) {
    std::FILE* f = std::fopen(fmt::format("/proc/{}/stat", pid).c_str(), "r");
    if (!f) return false;
    char buffer[512] = {};
    const std::size_t n = std::fread(buffer, 1, sizeof buffer - 1, f);
    std::fclose(f);
    const char* close = std::strrchr(buffer, ')');  // the command name may hold spaces and parentheses
    return n > 0 && close && close[1] == ' ' && close[2] == 'T';
}

}  // namespace

void HeartbeatPump::endStoppedNeighbours() {
    std::vector<std::pair<long, int>> others;
    int self = -1;
    {
        const std::lock_guard<std::mutex> lock(neighboursMutex);
        others = neighbours;
        self = ownRank;
    }
    // KILN_FENCING=0 (tests): a stopped process is left alone, to wake later (as recovery's fencing does).
    static const bool fencing = [] {
        const char* value = std::getenv("KILN_FENCING");
        return value == nullptr || std::string(value) != "0";
    }();
    const double limit = lastLimit.load();
    if (limit <= 0 || !fencing) return;
    const auto now = Clock::now();
    std::vector<std::pair<long, int>> overdue;
    int lowestAwake = self;  // the lowest start-up rank on this host not stopped acts, alone
    for (const auto& [pid, rank] : others) {
        if (!stopped(pid)) {
            stoppedSince_.erase(pid);
            lowestAwake = std::min(lowestAwake, rank);
            continue;
        }
        const auto [it, first] = stoppedSince_.emplace(pid, now);
        if (!first && std::chrono::duration<double>(now - it->second).count() > limit) overdue.emplace_back(pid, rank);
    }
    if (lowestAwake != self) return;
    for (const auto& [pid, rank] : overdue) {
        const auto it = stoppedSince_.find(pid);
        const double seconds = std::chrono::duration<double>(now - it->second).count();
        std::fprintf(stderr, "kiln: warning [rank %d on %s]: start-up rank %d (process %ld on this host) has been stopped "
                     "for %.1f s, over the step's deadline of %.1f s: ending it (SIGKILL) so that the job recovers without "
                     "it\n", log::rank(), log::host().c_str(), rank, pid, seconds, limit);
        std::fflush(stderr);
        ::kill(static_cast<pid_t>(pid), SIGKILL);
        stoppedSince_.erase(it);
    }
}

}  // namespace kiln::comm
