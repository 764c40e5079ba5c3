// Both sides of an admission (spawn.hpp), so that the protocol reads in one
// place. Over the bridge (the spawner, rank 0, and the new processes):
//   1. the spawner broadcasts the preparation and the port name;
//   2. the new processes get ready and each says so to the spawner;
//   3. at the boundary the spawner sends each a go and takes an ack back,
//      then the job accepts on the port and the new processes connect.
#include "kiln/comm/spawn.hpp"

#include "admission_deadline.hpp"

#include "kiln/base/error.hpp"
#include "kiln/base/log.hpp"
#include "kiln/comm/broadcast.hpp"
#include "kiln/comm/error_agreement.hpp"
#include "kiln/comm/heartbeat.hpp"
#include "kiln/comm/mpi_check.hpp"
#include "kiln/comm/ulfm.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <thread>

namespace kiln::comm {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kReadyTag = 7100, kGoTag = 7101, kAckTag = 7102;
constexpr const char* kJoinDeadlineVariable = "KILN_JOIN_DEADLINE_S";

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

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

// Collective over MPI_COMM_SELF: the new processes, and the intercommunicator to them.
MPI_Comm spawnFromSelf(int processes, const std::string& hosts) {
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
    // Should the spawner fail while they start, their MPI_Init cannot connect back: it must return the error
    // (MpiSession ends the process as a failed node), not abort, which would end the whole job with its status.
    KILN_MPI(MPI_Info_set(info, "mpi_initial_errhandler", "mpi_errors_return"));
    // Or their MPI_Init may wait for it for ever: they get a deadline.
    const std::string environment = fmt::format("{}={}", kJoinDeadlineVariable, spawnDeadlineSeconds());
    KILN_MPI(MPI_Info_set(info, "env", environment.c_str()));
    MPI_Comm children = MPI_COMM_NULL;
    std::vector<int> errors(static_cast<std::size_t>(processes), MPI_SUCCESS);
    const int rc =
        MPI_Comm_spawn(executable.c_str(), argv.data(), processes, info, 0, MPI_COMM_SELF, &children, errors.data());
    MPI_Info_free(&info);
    KILN_MPI(rc);
    KILN_MPI(MPI_Comm_set_errhandler(children, MPI_ERRORS_RETURN));
    return children;
}

// An intercommunicator merged into an intracommunicator, `high` side last; the intercommunicator is freed
// (the dynamic communicators left at MPI_Finalize are disconnected there, after the runtime is gone).
MPI_Comm mergeAndFree(MPI_Comm& inter, bool high) {
    MPI_Comm merged = MPI_COMM_NULL;
    const int rc = MPI_Intercomm_merge(inter, high ? 1 : 0, &merged);
    MPI_Comm_free(&inter);
    KILN_MPI(rc);
    KILN_MPI(MPI_Comm_set_errhandler(merged, MPI_ERRORS_RETURN));
    return merged;
}

// A spawned process's deadline, from MPI_Init to ready.
std::unique_ptr<AdmissionDeadline> joinDeadline;

}  // namespace

bool spawnedIntoJob() {
    MPI_Comm parent = MPI_COMM_NULL;
    KILN_MPI(MPI_Comm_get_parent(&parent));
    return parent != MPI_COMM_NULL;
}

double spawnDeadlineSeconds() { return std::max(60.0, 4.0 * heartbeatTimeout()); }

void armJoinDeadline() {
    const char* seconds = std::getenv(kJoinDeadlineVariable);
    if (seconds == nullptr || joinDeadline) return;
    joinDeadline = std::make_unique<AdmissionDeadline>(
        std::atof(seconds), fmt::format("process {} started to join the job", static_cast<long>(::getpid())),
        "starting and getting ready to join the running job");
}

// ---- the spawner's side ----

struct JoinersStarting::Shared {
    std::mutex mutex;
    std::condition_variable ended;  // the helper thread returned
    Phase phase = Phase::Starting;
    std::string problem;
    MPI_Comm bridge = MPI_COMM_NULL;
    bool givenUp = false, threadEnded = false, accepted = false;
    std::string port;
    Clock::time_point started = Clock::now();
    double readySeconds = 0;

    void fail(const std::string& why) {
        std::lock_guard<std::mutex> lock(mutex);
        if (phase != Phase::Failed) problem = why;
        phase = Phase::Failed;
    }
};

namespace {

// The helper thread: steps 1 and 2 of the protocol. MPI_Comm_spawn may wait
// for ever when a new process fails while it connects; the training thread
// never waits for this one.
void startAndPrepare(const std::shared_ptr<JoinersStarting::Shared>& shared, int processes, const std::string& hosts,
                     std::vector<std::int64_t> preparation) {
    try {
        MPI_Comm children = spawnFromSelf(processes, hosts);
        MPI_Comm bridge = mergeAndFree(children, /*high=*/false);
        std::string port;
        {
            std::lock_guard<std::mutex> lock(shared->mutex);
            shared->bridge = bridge;
            port = shared->port;
            if (shared->givenUp) revoke(bridge);
        }
        shared->ended.notify_all();  // a destructor waiting for the bridge
        broadcastVector(bridge, preparation, MPI_INT64_T);
        std::vector<char> portChars(port.begin(), port.end());
        broadcastVector(bridge, portChars, MPI_CHAR);
        // Polled, not a blocking collective: a new process that hangs must leave this thread free to see that
        // it was given up (and a blocking wait on the bridge for seconds disturbed the job's own communication).
        std::vector<int> ready(static_cast<std::size_t>(processes), 0);
        std::vector<MPI_Request> requests(static_cast<std::size_t>(processes), MPI_REQUEST_NULL);
        for (int p = 1; p <= processes; ++p)
            KILN_MPI(MPI_Irecv(&ready[static_cast<std::size_t>(p - 1)], 1, MPI_INT, p, kReadyTag, bridge,
                               &requests[static_cast<std::size_t>(p - 1)]));
        for (int all = 0; !all;) {
            KILN_MPI(MPI_Testall(processes, requests.data(), &all, MPI_STATUSES_IGNORE));
            if (all) break;
            {
                std::lock_guard<std::mutex> lock(shared->mutex);
                if (shared->givenUp) throw Error("given up before they were ready", ErrorScope::ThisRank);
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        std::lock_guard<std::mutex> lock(shared->mutex);
        if (shared->phase == JoinersStarting::Phase::Starting) {
            shared->phase = JoinersStarting::Phase::Ready;
            shared->readySeconds = since(shared->started);
        }
    } catch (const ProcFailedError& e) {
        shared->fail(fmt::format("a new process failed or was given up while it started: {}", e.what()));
    } catch (const std::exception& e) {
        shared->fail(e.what());
    }
    std::lock_guard<std::mutex> lock(shared->mutex);
    shared->threadEnded = true;
    shared->ended.notify_all();
}

}  // namespace

JoinersStarting::JoinersStarting(int processes, const std::string& hosts, std::vector<std::int64_t> preparation)
    : processes_(processes), shared_(std::make_shared<Shared>()) {
    char port[MPI_MAX_PORT_NAME] = {};
    KILN_MPI(MPI_Open_port(MPI_INFO_NULL, port));
    shared_->port = port;
    std::thread(startAndPrepare, shared_, processes, hosts, std::move(preparation)).detach();
}

JoinersStarting::~JoinersStarting() {
    std::unique_lock<std::mutex> lock(shared_->mutex);
    // Still starting (the job ends, say): a few seconds for the spawn to return, so that the bridge exists and
    // its revocation ends the new processes now, not at their own deadline (mpirun waits for them).
    if (!shared_->accepted && shared_->bridge == MPI_COMM_NULL && shared_->phase == Phase::Starting)
        shared_->ended.wait_for(lock, std::chrono::seconds(10),
                                [this] { return shared_->threadEnded || shared_->bridge != MPI_COMM_NULL; });
    if (!shared_->accepted) {
        // The new processes wait on the bridge: revoked, they end.
        shared_->givenUp = true;
        if (shared_->bridge != MPI_COMM_NULL) revoke(shared_->bridge);
    }
    // A helper thread still inside MPI_Comm_spawn cannot be interrupted: it is left there, with what it shares.
    if (shared_->ended.wait_for(lock, std::chrono::seconds(2), [this] { return shared_->threadEnded; })) {
        if (shared_->bridge != MPI_COMM_NULL) MPI_Comm_free(&shared_->bridge);
        MPI_Close_port(shared_->port.c_str());
    } else {
        log::warn("admission: the new processes' MPI_Comm_spawn has not returned; left behind");
    }
}

JoinersStarting::Phase JoinersStarting::phase() {
    std::lock_guard<std::mutex> lock(shared_->mutex);
    if (shared_->phase == Phase::Starting && since(shared_->started) > spawnDeadlineSeconds()) {
        shared_->phase = Phase::Failed;
        shared_->problem = fmt::format("the new processes were not ready within {:.0f} s; given up",
                                       spawnDeadlineSeconds());
        shared_->givenUp = true;
        if (shared_->bridge != MPI_COMM_NULL) revoke(shared_->bridge);
    }
    return shared_->phase;
}

std::string JoinersStarting::problem() const {
    std::lock_guard<std::mutex> lock(shared_->mutex);
    return shared_->problem;
}

double JoinersStarting::readySeconds() const {
    std::lock_guard<std::mutex> lock(shared_->mutex);
    return shared_->readySeconds;
}

const std::string& JoinersStarting::port() const { return shared_->port; }

void JoinersStarting::go() {
    // Ready: the helper thread has ended, the bridge is this thread's.
    const MPI_Comm bridge = shared_->bridge;
    int go = 1;
    for (int p = 1; p <= processes_; ++p) KILN_MPI(MPI_Send(&go, 1, MPI_INT, p, kGoTag, bridge));
    // An ack from each: none died since it said it was ready (a connect with a dead process would never end).
    for (int p = 1; p <= processes_; ++p) KILN_MPI(MPI_Recv(&go, 1, MPI_INT, p, kAckTag, bridge, MPI_STATUS_IGNORE));
}

void JoinersStarting::accepted() {
    std::lock_guard<std::mutex> lock(shared_->mutex);
    shared_->accepted = true;
}

MPI_Comm acceptJoiners(MPI_Comm control, int root, JoinersStarting* starting) {
    std::string problem;
    if (starting != nullptr) {
        try {
            starting->go();
        } catch (const std::exception& e) {
            problem = fmt::format("a new process can no longer be told to connect: {}", e.what());
        }
    }
    problem = firstError(control, problem);  // throws ProcFailedError when a rank of control failed
    if (!problem.empty()) throw Error(problem, ErrorScope::AllRanks);
    const AdmissionDeadline deadline(spawnDeadlineSeconds(), fmt::format("rank {} ({})", log::rank(), log::host()),
                                     "taking the admitted processes in");
    MPI_Comm inter = MPI_COMM_NULL;
    KILN_MPI(MPI_Comm_accept(starting != nullptr ? starting->port().c_str() : "", MPI_INFO_NULL, root, control, &inter));
    KILN_MPI(MPI_Comm_set_errhandler(inter, MPI_ERRORS_RETURN));
    MPI_Comm merged = mergeAndFree(inter, /*high=*/false);
    if (starting != nullptr) starting->accepted();
    return merged;
}

// ---- the new process's side ----

JoinerLink::JoinerLink() {
    MPI_Comm parent = MPI_COMM_NULL;
    KILN_MPI(MPI_Comm_get_parent(&parent));
    if (parent == MPI_COMM_NULL) throw Error("this process was not started by a running job", ErrorScope::ThisRank);
    KILN_MPI(MPI_Comm_set_errhandler(parent, MPI_ERRORS_RETURN));
    bridge_ = mergeAndFree(parent, /*high=*/true);
    broadcastVector(bridge_, preparation_, MPI_INT64_T);
    std::vector<char> port;
    broadcastVector(bridge_, port, MPI_CHAR);
    port_.assign(port.begin(), port.end());
}

JoinerLink::~JoinerLink() {
    if (bridge_ != MPI_COMM_NULL) MPI_Comm_free(&bridge_);
}

void JoinerLink::ready() {
    int one = 1;
    KILN_MPI(MPI_Send(&one, 1, MPI_INT, 0, kReadyTag, bridge_));
    joinDeadline.reset();  // ready: from here on a failed spawner is reported on the bridge
}

MPI_Comm JoinerLink::join() {
    // The job takes the new processes in at its next step boundary; a spawner that fails meanwhile is reported
    // (ULFM). The wait is still bounded, generously, for a spawner that would hang without being ended.
    int go = 0;
    MPI_Request request = MPI_REQUEST_NULL;
    KILN_MPI(MPI_Irecv(&go, 1, MPI_INT, 0, kGoTag, bridge_, &request));
    const auto waiting = Clock::now();
    const double patience = 10.0 * spawnDeadlineSeconds();
    for (int done = 0; !done;) {
        try {
            KILN_MPI(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
        } catch (const ProcFailedError&) {
            throw Error("the running job gave this process up, or the rank that started it failed, before it was taken "
                        "in; it ends, and the job goes on without it",
                        ErrorScope::ThisRank);
        }
        if (done) break;
        if (since(waiting) > patience) {
            MPI_Cancel(&request);
            throw Error(fmt::format("the running job did not take this process in within {:.0f} s", patience),
                        ErrorScope::ThisRank);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    KILN_MPI(MPI_Send(&go, 1, MPI_INT, 0, kAckTag, bridge_));
    const AdmissionDeadline deadline(spawnDeadlineSeconds(),
                                     fmt::format("process {} joining the job", static_cast<long>(::getpid())),
                                     "connecting to the running job");
    MPI_Comm inter = MPI_COMM_NULL;
    KILN_MPI(MPI_Comm_connect(port_.c_str(), MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter));
    KILN_MPI(MPI_Comm_set_errhandler(inter, MPI_ERRORS_RETURN));
    MPI_Comm merged = mergeAndFree(inter, /*high=*/true);
    MPI_Comm_free(&bridge_);
    return merged;
}

}  // namespace kiln::comm
