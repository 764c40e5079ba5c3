#include "kiln/comm/deadline.hpp"

#include "kiln/comm/heartbeat.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <thread>

namespace kiln::comm {

void pollWithDeadline(const std::function<bool()>& test, const std::function<std::string()>& what) {
    using Clock = std::chrono::steady_clock;
    const auto begun = Clock::now();
    for (std::uint64_t spins = 0; !test(); ++spins) {
        // As Open MPI's own blocking waits do when ranks share cores: a waiting rank spinning
        // without yielding slows the ranks that compute (and skews their measured speeds).
        std::this_thread::yield();
        if (spins % 256 != 255) continue;
        trainingThreadAlive();
        const double limit = communicationDeadline();
        const double waited = std::chrono::duration<double>(Clock::now() - begun).count();
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
