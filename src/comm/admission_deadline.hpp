// A deadline for the waits of an admission that cannot notice a failed peer
// (comm/spawn.hpp): past it, this process ends as a failed node does, so
// that the others go on without it instead of waiting with it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>

namespace kiln::comm {

class AdmissionDeadline {
public:
    // `who` names this process, `what` the wait.
    AdmissionDeadline(double seconds, std::string who, std::string what)
        : thread_([this, seconds, who = std::move(who), what = std::move(what)] {
              std::unique_lock<std::mutex> lock(mutex_);
              if (done_.wait_for(lock, std::chrono::duration<double>(seconds), [this] { return finished_; })) return;
              std::fprintf(stderr, "kiln: %s: %s made no progress for %.0f s (MPI_Comm_spawn, MPI_Init and the connect "
                           "cannot notice a failed peer); this process ends as a failed node, so that the job goes on "
                           "without it\n",
                           who.c_str(), what.c_str(), seconds);
              std::fflush(stderr);
              std::raise(SIGKILL);
          }) {}
    ~AdmissionDeadline() {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            finished_ = true;
        }
        done_.notify_all();
        thread_.join();
    }
    AdmissionDeadline(const AdmissionDeadline&) = delete;
    AdmissionDeadline& operator=(const AdmissionDeadline&) = delete;

private:
    std::mutex mutex_;
    std::condition_variable done_;
    bool finished_ = false;
    std::thread thread_;  // last: started once the rest is built
};

}  // namespace kiln::comm
