#include "kiln/fault/recovery.hpp"

#include "kiln/base/error.hpp"
#include "kiln/comm/mpi_check.hpp"
#include "kiln/comm/ulfm.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <set>

#include <signal.h>
#include <sys/types.h>

namespace kiln::fault {

using Clock = std::chrono::steady_clock;

namespace {
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
}  // namespace

std::string RecoveryReport::describe() const {
    return fmt::format("failed rank{} {} (node{} {} retired{}); {} ranks on {} node{} remain; revoke {:.1f} ms, shrink "
                       "{:.1f} ms, regroup {:.1f} ms",
                       failedRanks.size() == 1 ? "" : "s", fmt::join(failedRanks, ","), retiredNodes.size() == 1 ? "" : "s",
                       fmt::join(retiredNodes, ","), fenced > 0 ? fmt::format("; {} fenced with SIGKILL", fenced) : "",
                       ranksLeft, nodesLeft, nodesLeft == 1 ? "" : "s", 1e3 * revokeSeconds,
                       1e3 * shrinkSeconds, 1e3 * regroupSeconds);
}

RecoveryReport recover(comm::World& world) {
    RecoveryReport report;
    auto t0 = Clock::now();
    comm::revoke(world.control());
    report.revokeSeconds = since(t0);

    // The shrink is itself an agreement: every survivor gets the same group.
    t0 = Clock::now();
    MPI_Comm survivors = comm::shrink(world.control());
    report.shrinkSeconds = since(t0);

    t0 = Clock::now();
    const auto& members = world.members();
    for (int missing : comm::ranksMissingFrom(world.control(), survivors)) report.failedRanks.push_back(members[missing]);
    std::sort(report.failedRanks.begin(), report.failedRanks.end());
    std::set<int> retired;
    for (int r : report.failedRanks) retired.insert(world.nodeOfOriginal(r));
    // Fencing: the lowest survivor on a failed rank's host kills it, in case it only hung.
    for (int failed : report.failedRanks) {
        int fencer = -1;
        for (int r : members)
            if (!std::binary_search(report.failedRanks.begin(), report.failedRanks.end(), r) &&
                world.hostOf(r) == world.hostOf(failed)) {
                fencer = r;
                break;
            }
        if (fencer == world.originalRank() && ::kill(static_cast<pid_t>(world.pidOf(failed)), SIGKILL) == 0) ++report.fenced;
    }
    report.retiredNodes.assign(retired.begin(), retired.end());

    // Survivors in shrunk order, and who of them stays.
    std::vector<int> survivorMembers;
    for (int r = 0; r < static_cast<int>(members.size()); ++r)
        if (!std::binary_search(report.failedRanks.begin(), report.failedRanks.end(), members[r]))
            survivorMembers.push_back(members[r]);
    report.thisRankLeaves = retired.count(world.node()) > 0;

    MPI_Comm staying = MPI_COMM_NULL;
    // A rank that dies now makes the split fail: release the shrunk communicator
    // and let the caller recover again from the (revoked) control communicator.
    try {
        KILN_MPI(MPI_Comm_split(survivors, report.thisRankLeaves ? MPI_UNDEFINED : 0, 0, &staying));
    } catch (const ProcFailedError&) {
        comm::revoke(survivors);
        MPI_Comm_free(&survivors);
        throw;
    }
    std::vector<int> stayingMembers;
    std::set<int> nodes;
    for (int r : survivorMembers)
        if (!retired.count(world.nodeOfOriginal(r))) {
            stayingMembers.push_back(r);
            nodes.insert(world.nodeOfOriginal(r));
        }
    report.ranksLeft = static_cast<int>(stayingMembers.size());
    report.nodesLeft = static_cast<int>(nodes.size());
    MPI_Comm_free(&survivors);
    if (!report.thisRankLeaves) world.replaceControl(staying, stayingMembers);
    report.regroupSeconds = since(t0);
    return report;
}

}  // namespace kiln::fault
