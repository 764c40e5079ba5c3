#include "kiln/comm/spawn.hpp"

#include "kiln/comm/heartbeat.hpp"
#include "kiln/base/log.hpp"

#include "kiln/base/error.hpp"
#include "kiln/comm/mpi_check.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <csignal>
#include <thread>
#include <mutex>
#include <condition_variable>
#include <fstream>
#include <iterator>
#include <memory>
#include <cstdlib>
#include <string>
#include <vector>

namespace kiln::comm {
namespace {

// This process's arguments as the kernel has them (MPI_Init may have edited argv).
std::vector<std::string> ownArguments() {
    std::ifstream in("/proc/self/cmdline", std::ios::binary);
    const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::vector<std::string> args;
    for (std::size_t at = 0; at < all.size();) {
        const auto end = all.find('\0', at);
        args.push_back(all.substr(at, end - at));
        if (end == std::string::npos) break;
        at = end + 1;
    }
    if (!args.empty()) args.erase(args.begin());  // the executable goes separately, as /proc/self/exe
    return args;
}

}  // namespace

bool spawnedIntoJob() {
    MPI_Comm parent = MPI_COMM_NULL;
    KILN_MPI(MPI_Comm_get_parent(&parent));
    return parent != MPI_COMM_NULL;
}

namespace {

// MPI_Comm_spawn and the merge after it know nothing of failures on the job's
// side: a member of the job dying while the new processes connect leaves the
// spawning root in PMIx_Connect (under ompi_dpm_connect_accept) for ever,
// while the other survivors, told of the failure, wait for it in the shrink
// (seen in the chaos campaign: an old rank killed 10 ms after rank 0 took an
// admission request). The new processes can wait as long in MPI_Init and the
// merge when their spawner dies. Past the deadline a process ends as a failed
// node does, so that the others go on without it instead of waiting with it.
class AdmissionDeadline {
public:
    // `who` names this process, `what` the wait.
    AdmissionDeadline(double seconds, std::string who, std::string what)
        : thread_([this, seconds, who = std::move(who), what = std::move(what)] {
              std::unique_lock<std::mutex> lock(mutex_);
              if (done_.wait_for(lock, std::chrono::duration<double>(seconds), [this] { return finished_; })) return;
              std::fprintf(stderr, "kiln: %s: %s made no progress for %.0f s (MPI_Comm_spawn, MPI_Init and the merge "
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

private:
    std::mutex mutex_;
    std::condition_variable done_;
    bool finished_ = false;
    std::thread thread_;  // last: started once the rest is built
};

// A spawned process's deadline, from MPI_Init to the end of the merge.
std::unique_ptr<AdmissionDeadline> joinDeadline;
constexpr const char* kJoinDeadlineVariable = "KILN_JOIN_DEADLINE_S";

}  // namespace

double spawnDeadlineSeconds() { return std::max(60.0, 4.0 * heartbeatTimeout()); }

void armJoinDeadline() {
    const char* seconds = std::getenv(kJoinDeadlineVariable);
    if (seconds == nullptr || joinDeadline) return;
    joinDeadline = std::make_unique<AdmissionDeadline>(
        std::atof(seconds), fmt::format("process {} started to join the job", static_cast<long>(::getpid())),
        "joining the running job");
}

MPI_Comm spawnJoiners(MPI_Comm control, int processes, const std::string& hosts) {
    const AdmissionDeadline deadline(spawnDeadlineSeconds(), fmt::format("rank {} ({})", log::rank(), log::host()),
                                     "admitting nodes");
    const std::string executable = std::filesystem::read_symlink("/proc/self/exe").string();
    auto args = ownArguments();
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    MPI_Info info = MPI_INFO_NULL;
    KILN_MPI(MPI_Info_create(&info));
    // Relative paths in the command line (the deck, --set run.out_dir=...) mean what they meant to the job.
    KILN_MPI(MPI_Info_set(info, "wdir", std::filesystem::current_path().c_str()));
    if (!hosts.empty()) KILN_MPI(MPI_Info_set(info, "host", hosts.c_str()));
    // The new processes are part of a fault-tolerant job: one of them dying must not end it (mpirun --with-ft
    // ulfm marks only the first job so).
    KILN_MPI(MPI_Info_set(info, "PMIX_JOB_RECOVERABLE", "true"));
    // Should this process fail while they start, their MPI_Init cannot connect back: it must return the error
    // (MpiSession ends the process as a failed node), not abort, which would end the whole job with its status.
    KILN_MPI(MPI_Info_set(info, "mpi_initial_errhandler", "mpi_errors_return"));
    // Or their MPI_Init may wait for it for ever: they get the same deadline.
    const std::string environment = fmt::format("{}={}", kJoinDeadlineVariable, spawnDeadlineSeconds());
    KILN_MPI(MPI_Info_set(info, "env", environment.c_str()));
    MPI_Comm children = MPI_COMM_NULL;
    std::vector<int> errors(static_cast<std::size_t>(processes), MPI_SUCCESS);
    const int rc = MPI_Comm_spawn(executable.c_str(), argv.data(), processes, info, 0, control, &children, errors.data());
    MPI_Info_free(&info);
    KILN_MPI(rc);
    KILN_MPI(MPI_Comm_set_errhandler(children, MPI_ERRORS_RETURN));
    MPI_Comm merged = MPI_COMM_NULL;
    const int merging = MPI_Intercomm_merge(children, /*high=*/0, &merged);
    MPI_Comm_free(&children);
    KILN_MPI(merging);
    KILN_MPI(MPI_Comm_set_errhandler(merged, MPI_ERRORS_RETURN));
    return merged;
}

MPI_Comm mergeWithJob() {
    MPI_Comm parent = MPI_COMM_NULL;
    KILN_MPI(MPI_Comm_get_parent(&parent));
    if (parent == MPI_COMM_NULL) throw Error("this process was not started by a running job", ErrorScope::ThisRank);
    KILN_MPI(MPI_Comm_set_errhandler(parent, MPI_ERRORS_RETURN));
    MPI_Comm merged = MPI_COMM_NULL;
    KILN_MPI(MPI_Intercomm_merge(parent, /*high=*/1, &merged));
    KILN_MPI(MPI_Comm_set_errhandler(merged, MPI_ERRORS_RETURN));
    joinDeadline.reset();  // joined
    return merged;
}

}  // namespace kiln::comm
