#include "kiln/fault/recovery.hpp"

#include "kiln/base/error.hpp"
#include "kiln/comm/host_fence.hpp"
#include "kiln/comm/mpi_check.hpp"
#include "kiln/comm/ulfm.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <set>
#include <string>

#include <signal.h>
#include <sys/types.h>

namespace kiln::fault {

using Clock = std::chrono::steady_clock;

namespace {
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
}  // namespace

std::string RecoveryReport::describe() const {
    // A failed rank of a node retired before (a benched rank) retires nothing new.
    const std::string nodes = retiredNodes.empty()
                                  ? std::string("on a node retired before")
                                  : fmt::format("node{} {} retired", retiredNodes.size() == 1 ? "" : "s",
                                                fmt::join(retiredNodes, ","));
    return fmt::format("failed rank{} {} ({}{}); {} rank{} on {} node{} remain; revoke {:.1f} ms, shrink {:.1f} ms, "
                       "regroup {:.1f} ms",
                       failedRanks.size() == 1 ? "" : "s", fmt::join(failedRanks, ","), nodes,
                       fenced > 0 ? fmt::format("; {} fenced with SIGKILL", fenced) : "", ranksLeft,
                       ranksLeft == 1 ? "" : "s", nodesLeft, nodesLeft == 1 ? "" : "s", 1e3 * revokeSeconds,
                       1e3 * shrinkSeconds, 1e3 * regroupSeconds);
}

RecoveryReport recover(comm::World& world, const std::set<int>& retired) {
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
    std::set<int> newlyRetired;
    for (int r : report.failedRanks)
        if (!retired.count(world.nodeOfOriginal(r))) newlyRetired.insert(world.nodeOfOriginal(r));
    // Fencing: the lowest survivor on a failed rank's host kills it, in case it only hung
    // (KILN_FENCING=0, for tests: it is left alone, to wake later; the epoch fence stops its writes).
    static const bool fencing = [] {
        const char* value = std::getenv("KILN_FENCING");
        return value == nullptr || std::string(value) != "0";
    }();
    for (int failed : report.failedRanks) {
        if (!fencing) break;
        int fencer = -1;
        for (int r : members)
            if (!std::binary_search(report.failedRanks.begin(), report.failedRanks.end(), r) &&
                world.hostOf(r) == world.hostOf(failed)) {
                fencer = r;
                break;
            }
        // Through a pidfd held since start-up: a failed process that has exited, its id reused, is never hit.
        if (fencer == world.originalRank() && comm::killHostMate(failed)) ++report.fenced;
    }
    report.retiredNodes.assign(newlyRetired.begin(), newlyRetired.end());

    // Survivors in shrunk order; the ones that stay are those on nodes not retired.
    std::vector<int> survivorMembers;
    std::set<int> nodes, before;
    for (int r : members)
        if (!retired.count(world.nodeOfOriginal(r))) before.insert(world.nodeOfOriginal(r));
    report.nodesBefore = static_cast<int>(before.size());
    for (int r : members) {
        if (std::binary_search(report.failedRanks.begin(), report.failedRanks.end(), r)) continue;
        survivorMembers.push_back(r);
        if (const int node = world.nodeOfOriginal(r); !retired.count(node) && !newlyRetired.count(node)) {
            ++report.ranksLeft;
            nodes.insert(world.nodeOfOriginal(r));
        }
    }
    report.nodesLeft = static_cast<int>(nodes.size());
    report.lowestNodeLeft = nodes.empty() ? -1 : *nodes.begin();
    std::set<std::string> survivingHosts, lostHosts;
    for (int r : survivorMembers) survivingHosts.insert(world.hostOf(r));
    for (int r : report.failedRanks)
        if (!survivingHosts.count(world.hostOf(r))) lostHosts.insert(world.hostOf(r));
    report.hostsLost = static_cast<int>(lostHosts.size());
    world.replaceControl(survivors, survivorMembers);
    report.regroupSeconds = since(t0);
    return report;
}

}  // namespace kiln::fault
