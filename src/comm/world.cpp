#include "kiln/comm/world.hpp"

#include "kiln/comm/host_fence.hpp"
#include "kiln/comm/broadcast.hpp"
#include "kiln/comm/deadline.hpp"
#include "kiln/comm/idle_wait.hpp"

#include "kiln/comm/revoke_guard.h"

#include "kiln/base/log.hpp"
#include "kiln/base/error.hpp"
#include "kiln/comm/mpi_check.hpp"
#include "kiln/comm/spawn.hpp"
#include "kiln/comm/ulfm.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <set>
#include <thread>
#include <string>
#include <vector>

namespace kiln::comm {
namespace {

// The node (host, or Slurm's node) of each rank the job started with; empty where nodes are emulated on one
// machine (their names say nothing a launcher could exclude) and in processes admitted later (their
// MPI_COMM_WORLD is their own).
std::vector<std::string>& nodeNameOfStartupRank() {
    static std::vector<std::string> names;
    return names;
}

std::string hostName() {
    char name[256] = {};
    gethostname(name, sizeof(name) - 1);
    return name;
}

// Every rank's host (or Slurm node) name, on every rank. The names travel as
// wide as the longest one, not in fixed 256-byte slots: host names are a few
// dozen bytes, so 4096 ranks gather some 100 KB instead of 1 MiB. Every rank
// must know every rank's node (templates, regroups), so some O(ranks) gather
// is inherent; it happens once at start-up and once per admission.
std::vector<std::string> gatherHosts(MPI_Comm comm, const std::string& host, int size) {
    int width = static_cast<int>(host.size()) + 1;
    KILN_MPI(MPI_Allreduce(MPI_IN_PLACE, &width, 1, MPI_INT, MPI_MAX, comm));
    std::vector<char> mine(static_cast<std::size_t>(width), '\0');
    host.copy(mine.data(), mine.size() - 1);
    std::vector<char> all(static_cast<std::size_t>(width) * size);
    KILN_MPI(MPI_Allgather(mine.data(), width, MPI_CHAR, all.data(), width, MPI_CHAR, comm));
    std::vector<std::string> hosts;
    for (int r = 0; r < size; ++r) hosts.emplace_back(&all[static_cast<std::size_t>(r) * width]);
    return hosts;
}

}  // namespace

namespace {
bool guardArmed = false;
std::string guardStatus = "not armed: MPI not started";
}  // namespace

MpiSession::MpiSession(int* argc, char*** argv, double hangTimeoutSeconds) {
    if (hangTimeoutSeconds > 0) enableHeartbeatDetector(hangTimeoutSeconds);
    // Open MPI's hierarchical collectives (coll/han) split a communicator into node-local and cross-node ones
    // on its first all-reduce: a communicator creation behind kiln's back, right after a recovery, where Open
    // MPI 5.0.10 can crash while a second failure is noticed (seen under Slurm: a segmentation fault in
    // ompi_comm_split_type under mca_coll_han_allreduce_intra). kiln's collectives are a few scalars: off,
    // unless the environment chooses the components itself.
    setenv("OMPI_MCA_coll", "^han", /*overwrite=*/0);
    // Over TCP, a large message's receiver schedules the sender's "put" fragments; when the sender's host dies
    // in that exchange, Open MPI 5.0.10's ob1 dereferences the dead peer's endpoint and the healthy receiver
    // crashes (seen on emulated hosts: a segmentation fault in mca_pml_ob1_recv_request_schedule_once under
    // mca_pml_ob1_send_fin, taking a second node with the one lost). Without the put flag, ob1 sends large
    // messages in fragments the sender schedules, a path the failure takes cleanly.
    setenv("OMPI_MCA_btl_tcp_flags", "send,inplace,need-ack,need-csum", /*overwrite=*/0);
    // With ULFM on, MPI_Finalize starts with a PMIx fence over the job's namespace, which after a failure
    // holds the dead process: the fence may never complete (seen in 4 runs of 34 of tests/fault/
    // spawn_after_failure.c; kiln's exit watchdog is there for such waits). ULFM's finalize flushes all
    // traffic first with a barrier over the survivors, the fence's purpose, so the fence is skipped.
    if (const char* ft = std::getenv("OMPI_MCA_mpi_ft_enable"); ft != nullptr && std::string(ft) != "0")
        setenv("OMPI_MCA_async_mpi_finalize", "1", /*overwrite=*/0);
    // A peer that dies leaves its TCP connections half closed; the next write to
    // one raises SIGPIPE, whose default action would kill this healthy rank too
    // (seen under Slurm, where ranks of other nodes talk over TCP). Ignored, the
    // write fails with EPIPE and ULFM reports the dead peer.
    std::signal(SIGPIPE, SIG_IGN);
    yieldInMpiWhereWaitsSleep();  // Open MPI's blocking calls then reach kiln's naps (idle_wait.hpp)
    armJoinDeadline();  // a process a running job spawned: MPI_Init may wait for a spawner that died
    int provided = 0;
    // Funneled: only the training thread calls MPI (the prefetch thread reads files), unless
    // the heartbeat pump drives progress from its own thread.
    // MPI_Init's errors are fatal by the standard; from here on they return, and are checked.
    if (MPI_Init_thread(argc, argv, hangTimeoutSeconds > 0 ? MPI_THREAD_MULTIPLE : MPI_THREAD_FUNNELED, &provided) !=
        MPI_SUCCESS) {
        // Only a process a running job spawned gets here (its spawner asks MPI_Init to return errors,
        // comm/spawn.cpp): the process that spawned it failed before it could join. It ends as a failed node
        // does, which the job survives; an abort would end the job's mpirun with this process's status.
        std::fprintf(stderr, "kiln: error: this process, admitted into a running job, could not join it "
                             "(MPI_Init_thread failed: a process of the job failed while it started); it ends as a "
                             "failed node, and the job goes on without it\n");
        std::fflush(stderr);
        std::raise(SIGKILL);
    }
    if (hangTimeoutSeconds > 0 && provided != MPI_THREAD_MULTIPLE)
        throw Error(fmt::format("fault.hang_timeout_s needs an MPI with MPI_THREAD_MULTIPLE (this one provides level {})",
                                provided),
                    ErrorScope::AllRanks);
    KILN_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    // Known from here on, so that an error every rank meets (a bad deck) is printed once, by rank 0.
    int rank = 0;
    KILN_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    log::setIdentity(rank, hostName());
    // Before any failure can be noticed: Open MPI 5.0's crash when a failure is noticed while a communicator
    // is created (a shrink hit by a second failure) is guarded (revoke_guard.h).
    char why[160] = {};
    guardArmed = kiln_arm_revoke_guard(why, sizeof why) == 1;
    guardStatus = why;
    if (hangTimeoutSeconds > 0) heartbeat_ = std::make_unique<HeartbeatPump>(hangTimeoutSeconds);
}

std::string revokeGuardStatus() {
    return guardArmed ? fmt::format("{}; it lent its table {} time{}", guardStatus, kiln_revoke_guard_saves(),
                                    kiln_revoke_guard_saves() == 1 ? "" : "s")
                      : guardStatus;
}

MpiSession::~MpiSession() {
    // Unwinding from an error: leave MPI up, so that main can abort the job for
    // an error of one rank instead of hanging in a collective MPI_Finalize.
    if (std::uncaught_exceptions() > 0) return;
    heartbeat_.reset();  // no MPI call from another thread once finalize starts
    int finalized = 0;
    // A destructor cannot throw: a failing finalize has nothing left to report to.
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
}

World::World(int ranksPerNode) {
    KILN_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &control_));
    KILN_MPI(MPI_Comm_set_errhandler(control_, MPI_ERRORS_RETURN));
    KILN_MPI(MPI_Comm_rank(control_, &rank_));
    KILN_MPI(MPI_Comm_size(control_, &size_));
    host_ = hostName();
    log::setIdentity(rank_, host_);  // stays the start-up rank: messages name the process
    hosts_ = gatherHosts(control_, host_, size_);
    // Under Slurm a rank's node is the one Slurm placed it on (several emulated
    // nodes may share a host); every rank must know it, or none is trusted.
    const char* slurmNode = std::getenv("SLURMD_NODENAME");
    int everyRankKnows = slurmNode != nullptr && *slurmNode != '\0' ? 1 : 0;
    KILN_MPI(MPI_Allreduce(MPI_IN_PLACE, &everyRankKnows, 1, MPI_INT, MPI_MIN, control_));
    if (everyRankKnows) {
        nodeSource_ = NodeSource::Slurm;
        nodes_ = nodesByHost(gatherHosts(control_, slurmNode, size_));
    } else if (ranksPerNode > 0) {
        nodeSource_ = NodeSource::Emulated;
        nodes_ = nodesByCount(size_, ranksPerNode);
    } else {
        nodes_ = nodesByHost(hosts_);
    }
    long pid = static_cast<long>(::getpid());
    pids_.resize(static_cast<std::size_t>(size_));
    KILN_MPI(MPI_Allgather(&pid, 1, MPI_LONG, pids_.data(), 1, MPI_LONG, control_));
    faultTolerant_ = ulfmActive();
    countRanksOnHost(control_);
    members_.resize(static_cast<std::size_t>(size_));
    for (int r = 0; r < size_; ++r) members_[static_cast<std::size_t>(r)] = r;
    watchHostMates();
    if (nodeSource_ != NodeSource::Emulated)
        for (int r = 0; r < size_; ++r) nodeNameOfStartupRank().push_back(nodes_.nodeNames[nodes_.nodeOfRank[r]]);
}

std::vector<std::string> nodeNamesOfStartupRanks(const std::vector<int>& ranks) {
    std::set<std::string> names;
    const auto& known = nodeNameOfStartupRank();
    for (const int r : ranks)
        if (r >= 0 && static_cast<std::size_t>(r) < known.size()) names.insert(known[static_cast<std::size_t>(r)]);
    return {names.begin(), names.end()};
}

void World::watchHostMates() const {
    std::vector<std::pair<long, int>> mates;
    for (int m : members_)
        if (m != originalRank() && hosts_[static_cast<std::size_t>(m)] == host_) mates.emplace_back(pidOf(m), m);
    holdHostMates(mates);  // while they live: a fence later reaches them, never a reused process id
    setRanksShareCores(ranksOutnumberCores(static_cast<long>(mates.size()) + 1));
    watchHost(originalRank(), std::move(mates));
}

void World::countRanksOnHost(MPI_Comm comm) {
    int rank = 0;
    KILN_MPI(MPI_Comm_rank(comm, &rank));
    MPI_Comm host = MPI_COMM_NULL;
    KILN_MPI(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &host));
    KILN_MPI(MPI_Comm_size(host, &ranksOnHost_));
    KILN_MPI(MPI_Comm_rank(host, &rankOnHost_));
    KILN_MPI(MPI_Comm_free(&host));
}

World::World(NotJoinedYet) {
    host_ = hostName();
    faultTolerant_ = ulfmActive();
    // The processes spawned together share the hosts' cores (and GPUs) among themselves.
    countRanksOnHost(MPI_COMM_WORLD);
}

void World::join(MPI_Comm merged) {
    adopt(merged, /*ranksPerNode: the job's*/ 0, /*spawned=*/true);
    log::setIdentity(originalRank(), host_);
    watchHostMates();
}

std::vector<int> World::grow(MPI_Comm merged, int ranksPerNode) {
    MPI_Comm old = control_;
    const auto added = adopt(merged, ranksPerNode, /*spawned=*/false);
    if (old != MPI_COMM_NULL) MPI_Comm_free(&old);
    watchHostMates();
    return added;
}

std::vector<int> World::adopt(MPI_Comm merged, int ranksPerNode, bool spawned) {
    int mergedRank = 0, mergedSize = 0;
    KILN_MPI(MPI_Comm_rank(merged, &mergedRank));
    KILN_MPI(MPI_Comm_size(merged, &mergedSize));
    const auto mergedHosts = gatherHosts(merged, host_, mergedSize);
    long pid = static_cast<long>(::getpid());
    std::vector<long> mergedPids(static_cast<std::size_t>(mergedSize));
    KILN_MPI(MPI_Allgather(&pid, 1, MPI_LONG, mergedPids.data(), 1, MPI_LONG, merged));

    // The job's tables, as rank 0 knows them: counts, members, node of each
    // start-up rank, pids; node names and hosts as lines.
    std::vector<long> table;
    std::string text;
    if (!spawned && mergedRank == 0) {
        table = {static_cast<long>(nodes_.nodeOfRank.size()), static_cast<long>(nodes_.numNodes()),
                 static_cast<long>(members_.size()), static_cast<long>(nodeSource_), static_cast<long>(ranksPerNode)};
        table.insert(table.end(), members_.begin(), members_.end());
        table.insert(table.end(), nodes_.nodeOfRank.begin(), nodes_.nodeOfRank.end());
        table.insert(table.end(), pids_.begin(), pids_.end());
        for (const auto& name : nodes_.nodeNames) text += name + '\n';
        for (const auto& host : hosts_) text += host + '\n';
    }
    broadcastVector(merged, table, MPI_LONG);
    std::vector<char> chars(text.begin(), text.end());
    broadcastVector(merged, chars, MPI_CHAR);
    const auto startupRanks = static_cast<std::size_t>(table.at(0)), nodeCount = static_cast<std::size_t>(table.at(1)),
               jobRanks = static_cast<std::size_t>(table.at(2));
    ranksPerNode = static_cast<int>(table.at(4));
    if (ranksPerNode < 1) throw Error("new nodes need at least one rank each", ErrorScope::AllRanks);
    if (spawned) {
        nodeSource_ = static_cast<NodeSource>(table[3]);
        auto at = table.begin() + 5;
        members_.assign(at, at + static_cast<long>(jobRanks));
        at += static_cast<long>(jobRanks);
        nodes_ = NodeMap{};
        nodes_.nodeOfRank.assign(at, at + static_cast<long>(startupRanks));
        at += static_cast<long>(startupRanks);
        pids_.assign(at, at + static_cast<long>(startupRanks));
        std::vector<std::string> lines;
        std::string line;
        for (char c : chars) {
            if (c != '\n') {
                line += c;
                continue;
            }
            lines.push_back(line);
            line.clear();
        }
        nodes_.nodeNames.assign(lines.begin(), lines.begin() + static_cast<long>(nodeCount));
        hosts_.assign(lines.begin() + static_cast<long>(nodeCount), lines.end());
        nodes_.ranksOfNode.assign(nodeCount, {});
        for (std::size_t r = 0; r < startupRanks; ++r)
            nodes_.ranksOfNode[static_cast<std::size_t>(nodes_.nodeOfRank[r])].push_back(static_cast<int>(r));
    }
    if (static_cast<std::size_t>(mergedSize) < jobRanks)
        throw Error("the merged communicator is smaller than the job", ErrorScope::AllRanks);

    // The spawned processes: the next start-up ranks, on new nodes.
    std::vector<int> added;
    for (std::size_t r = jobRanks; r < static_cast<std::size_t>(mergedSize); ++r) {
        const int startup = static_cast<int>(startupRanks + (r - jobRanks));
        const int node = static_cast<int>(nodeCount + (r - jobRanks) / static_cast<std::size_t>(ranksPerNode));
        if (node == nodes_.numNodes()) {
            nodes_.ranksOfNode.emplace_back();
            nodes_.nodeNames.push_back(nodeSource_ == NodeSource::Emulated ? "node" + std::to_string(node)
                                                                          : mergedHosts[r]);
            added.push_back(node);
        }
        nodes_.nodeOfRank.push_back(node);
        nodes_.ranksOfNode[static_cast<std::size_t>(node)].push_back(startup);
        hosts_.push_back(mergedHosts[r]);
        pids_.push_back(mergedPids[r]);
        members_.push_back(startup);
    }
    control_ = merged;
    KILN_MPI(MPI_Comm_set_errhandler(control_, MPI_ERRORS_RETURN));
    rank_ = mergedRank;
    size_ = mergedSize;
    return added;
}

void World::replaceControl(MPI_Comm survivors, std::vector<int> members) {
    MPI_Comm old = control_;
    control_ = survivors;
    KILN_MPI(MPI_Comm_set_errhandler(control_, MPI_ERRORS_RETURN));
    KILN_MPI(MPI_Comm_rank(control_, &rank_));
    KILN_MPI(MPI_Comm_size(control_, &size_));
    members_ = std::move(members);
    watchHostMates();
    // The old control communicator was revoked by the failure: freeing it may
    // report that failure again, and releases the handle all the same.
    if (old != MPI_COMM_NULL) MPI_Comm_free(&old);
}

World::~World() {
    if (control_ != MPI_COMM_NULL) MPI_Comm_free(&control_);  // in a destructor: nothing to report to
}

void armExitWatchdog(int exitCode, double seconds, const char* after) {
    std::thread([exitCode, seconds, after] {
        std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
        std::fprintf(stderr, "kiln: warning [rank %d on %s]: MPI_Finalize did not return within %g s after %s "
                     "(fault.finalize_timeout_s); exiting with status %d without it\n",
                     log::rank(), log::host().c_str(), seconds, after, exitCode);
        std::fflush(stdout);
        std::fflush(stderr);
        std::_Exit(exitCode);
    }).detach();
}

std::string mpiLibraryVersion() {
    char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
    int length = 0;
    KILN_MPI(MPI_Get_library_version(text, &length));
    std::string version(text, static_cast<std::size_t>(length));
    if (const auto nl = version.find_first_of("\n,"); nl != std::string::npos) version.resize(nl);
    return version;
}

}  // namespace kiln::comm
