#include "kiln/comm/deadline.hpp"

#include "kiln/comm/heartbeat.hpp"

#include <fmt/format.h>

#include <chrono>

namespace kiln::comm {
namespace {

constexpr double kSignInterval = 0.1;  // seconds between the training thread's signs of life while it waits

}  // namespace

void pollWithDeadline(const std::function<bool()>& test, const std::function<std::string()>& what) {
    using Clock = std::chrono::steady_clock;
    using Seconds = std::chrono::duration<double>;
    const ProgressHere progress;
    const auto begun = Clock::now();
    auto lastSign = begun;
    for (;;) {
        const unsigned long idleBefore = idleMomentsOnThisThread();
        if (test()) break;
        const auto now = Clock::now();
        const double waited = Seconds(now - begun).count();
        // A short wait spins; where ranks share cores a long one naps and gives its core to the ranks that compute
        // (idle_wait.hpp): spinning for whole steps starved them (a 6-rank test on 2 cores spent 32 s of its 100 s
        // of CPU in the kernel, yielding and polling sockets, and a rank's backward beside two such tests gave no
        // sign of life for 15 s). Once only: an MPI_Test whose progress found nothing has yielded, or napped, already.
        if (idleMomentsOnThisThread() == idleBefore) passIdleMoment(waited);
        if (Seconds(now - lastSign).count() < kSignInterval) continue;
        lastSign = now;
        trainingThreadAlive();
        const double limit = communicationDeadline();
        if (limit > 0 && waited > limit)
            throw CommunicationTimeout(fmt::format(
                "no progress for {:.1f} s (fault.step_timeout_s, plus twice fault.hang_timeout_s for the detector to "
                "find a hung peer first) in {}",
                waited, what()));
    }
}

std::vector<int> startupRanksOf(MPI_Comm comm, const std::vector<int>& peers) {
    // Group calls are local: they work on a communicator that failures left behind.
    MPI_Group group = MPI_GROUP_NULL, world = MPI_GROUP_NULL;
    std::vector<int> translated(peers.size(), MPI_UNDEFINED), out;
    if (peers.empty() || MPI_Comm_group(comm, &group) != MPI_SUCCESS) return out;
    if (MPI_Comm_group(MPI_COMM_WORLD, &world) == MPI_SUCCESS)
        MPI_Group_translate_ranks(group, static_cast<int>(peers.size()), peers.data(), world, translated.data());
    for (const int rank : translated)
        if (rank != MPI_UNDEFINED) out.push_back(rank);
    if (world != MPI_GROUP_NULL) MPI_Group_free(&world);
    MPI_Group_free(&group);
    return out;
}

int waitWithDeadline(MPI_Request& request, MPI_Status* status, const std::function<std::string()>& what) {
    int rc = MPI_SUCCESS;
    pollWithDeadline(
        [&] {
            int done = 0;
            rc = MPI_Test(&request, &done, status ? status : MPI_STATUS_IGNORE);
            return done != 0 || rc != MPI_SUCCESS;
        },
        what);
    return rc;
}

}  // namespace kiln::comm
