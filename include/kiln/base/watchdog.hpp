// A deadline kept by a thread of its own: `fire` runs once `seconds` have
// passed, unless the watchdog was destroyed first (the guarded work ended).
// For waits that cannot poll a clock themselves (a blocking MPI call, a
// collective Open MPI may never complete); `fire` usually ends the process.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace kiln::base {

class Watchdog {
public:
    Watchdog(double seconds, std::function<void()> fire) {
        if (!(seconds > 0)) return;
        thread_ = std::thread([this, seconds, fire = std::move(fire)] {
            std::unique_lock<std::mutex> lock(mutex_);
            if (done_.wait_for(lock, std::chrono::duration<double>(seconds), [this] { return finished_; })) return;
            lock.unlock();
            fire();
        });
    }
    ~Watchdog() {
        if (!thread_.joinable()) return;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            finished_ = true;
        }
        done_.notify_all();
        thread_.join();
    }
    Watchdog(const Watchdog&) = delete;
    Watchdog& operator=(const Watchdog&) = delete;

private:
    std::mutex mutex_;
    std::condition_variable done_;
    bool finished_ = false;
    std::thread thread_;  // last: started once the rest is built
};

}  // namespace kiln::base
