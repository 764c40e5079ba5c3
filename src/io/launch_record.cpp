#include "kiln/io/launch_record.hpp"

#include "kiln/base/log.hpp"
#include "kiln/comm/connection_reset.hpp"
#include "kiln/io/atomic_file.hpp"
#include "kiln/io/fence.hpp"
#include "kiln/io/quorum_witness.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <mpi.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <system_error>
#include <thread>
#include <unistd.h>

namespace kiln::io {
namespace {

std::optional<std::string> environment(const char* name) {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') return std::nullopt;
    return std::string(value);
}

std::string oneLine(std::string text) {
    for (char& c : text)
        if (c == '\n' || c == '\r') c = ' ';
    return text;
}

struct Beacon {
    std::mutex mutex;
    std::condition_variable wake;
    bool stop = false;
    std::thread thread;
};

Beacon& beacon() {
    static Beacon instance;
    return instance;
}

}  // namespace

void writeEndRecord(int status, const std::string& what, std::uint64_t nodeFailures) {
    const auto path = environment("KILN_END_RECORD");
    if (!path || !log::speaksForJob()) return;
    try {
        writeFileAtomically(*path, fmt::format("kiln-end-record 1\nstatus {}\n{}\nnode_failures {}\n", status,
                                               oneLine(what), nodeFailures));
        // Finished: what a side of this launch left at a deadline while this one held the quorum and went on
        // describes no lost launch (the launcher's own account, kind launch, stays: a launch it saw end).
        if (status == 0) {
            std::ifstream lost(*path + ".lost");
            std::string first;
            if (std::getline(lost, first) && first == "kind deadline") {
                lost.close();
                std::error_code ignored;
                std::filesystem::remove(*path + ".lost", ignored);
            }
        }
    } catch (const std::exception& e) {
        // The launcher then requeues: the safe reading of a job whose end it cannot confirm.
        log::warn("could not write the end record {}: {}", *path, e.what());
    }
}

void endJobForRequeue(const std::string& why, const std::vector<std::string>& silentNodes) {
    // A process the job has moved on from (cut off while the others recovered and published a newer epoch)
    // writes nothing the job reads, an end record least of all: it ends as a failed node does.
    const bool movedOn = fence().published() > fence().epoch();
    if (movedOn || (!fence().directory().empty() && quorumHeldElsewhere(fence().directory(), fence().epoch(), log::rank()))) {
        log::warn("{}; the job has gone on without this process ({}): it ends, writing nothing", why,
                  movedOn ? fmt::format("epoch {} against {}", fence().epoch(), fence().published())
                          : std::string("another side holds the quorum witness"));
        std::fflush(stderr);
        comm::resetConnectionsOnExit();  // as a standing-down side (train/trainer_recovery.cpp)
        std::raise(SIGKILL);
    }
    const std::string silent = fmt::format("{}", fmt::join(silentNodes, ","));
    log::warn("{}; the job ends for a requeue (exit 75), recording no one as failed{}", why,
              silent.empty() ? std::string() : fmt::format(" (it waited on node{} {}: the requeue leaves them out)",
                                                           silentNodes.size() == 1 ? "" : "s", silent));
    log::speakForJob(true);
    writeEndRecord(75, why);
    // For the next attempt's /failures row (cause "deadline"), as kiln-mpirun leaves one for a lost launch.
    if (const auto record = environment("KILN_END_RECORD")) {
        try {
            writeFileAtomically(*record + ".lost", fmt::format("kind deadline\nhost {}\ncause {}\n", silent, oneLine(why)));
        } catch (const std::exception&) {
        }
    }
    std::fflush(stdout);
    std::fflush(stderr);
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, 75);
    ::_exit(75);  // MPI_Abort itself may wait for a runtime that lost a host
}

void markStoodDown(const std::filesystem::path& witness, double claimWithinSeconds, const std::string& why) {
    const auto record = environment("KILN_END_RECORD");
    if (!record) return;
    // Another side claimed the quorum: the launcher needs no word, and a side cut off that stands down late (after
    // the job ended) would leave the file behind.
    std::error_code missing;
    if (std::filesystem::exists(witness, missing)) return;
    try {
        writeFileAtomically(*record + ".stood_down",
                            fmt::format("kiln-stood-down 1\nstale_after_s {:.0f}\nwitness {}\n{}\n", claimWithinSeconds,
                                        std::filesystem::absolute(witness).string(), oneLine(why)));
    } catch (const std::exception& e) {
        // The launcher then waits for the alive beacon's limit: later, not wrong.
        log::warn("could not tell the launcher that this side stood down ({}): {}", *record + ".stood_down", e.what());
    }
}

void startAliveBeacon(double staleAfterSeconds) {
    const auto record = environment("KILN_END_RECORD");
    if (!record) return;
    Beacon& b = beacon();
    if (b.thread.joinable()) return;
    b.stop = false;
    b.thread = std::thread([path = *record + ".alive", staleAfterSeconds, parent = ::getppid()] {
        Beacon& self = beacon();
        bool written = false;
        std::unique_lock<std::mutex> lock(self.mutex);
        while (!self.stop) {
            // The launcher's daemon on this host ended (the runtime ended the job, or it died): this process is
            // an orphan of a job that is over, and ends before it trains or records anything more.
            if (::getppid() != parent) {
                log::warn("the launcher's daemon on this host (process {}) ended: this process ends with it", parent);
                std::raise(SIGKILL);
            }
            if (log::speaksForJob()) {
                if (!written) {  // a speaker that took over says the limit again
                    std::ofstream(path) << fmt::format("stale_after_s {:.0f}\n", staleAfterSeconds);
                    written = true;
                }
                ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0);
            } else {
                written = false;
            }
            self.wake.wait_for(lock, std::chrono::seconds(1));
        }
    });
}

void stopAliveBeacon() {
    Beacon& b = beacon();
    if (!b.thread.joinable()) return;
    {
        std::lock_guard<std::mutex> lock(b.mutex);
        b.stop = true;
    }
    b.wake.notify_all();
    b.thread.join();
}

std::optional<LaunchLoss> takeLaunchLoss() {
    const auto path = environment("KILN_LAUNCH_LOST");
    if (!path) return std::nullopt;
    std::ifstream in(*path);
    if (!in) return std::nullopt;
    LaunchLoss loss;
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("host ", 0) == 0) loss.host = line.substr(5);
        if (line.rfind("cause ", 0) == 0) loss.cause = line.substr(6);
        if (line.rfind("kind ", 0) == 0) loss.kind = line.substr(5);
    }
    in.close();
    std::error_code ignored;
    std::filesystem::remove(*path, ignored);
    return loss;
}

}  // namespace kiln::io
