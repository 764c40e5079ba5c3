// The MPI world of one kiln process: start-up, identity, nodes, and the
// control communicator that recovery repairs (every other communicator is
// rebuilt from it).
#pragma once

#include "kiln/comm/heartbeat.hpp"
#include "kiln/comm/node_map.hpp"

#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

namespace kiln::comm {

// Owns MPI_Init/MPI_Finalize. One per process. hangTimeoutSeconds > 0
// switches on hang detection (see heartbeat.hpp) for this process.
class MpiSession {
public:
    MpiSession(int* argc, char*** argv, double hangTimeoutSeconds = 0);
    ~MpiSession();
    MpiSession(const MpiSession&) = delete;
    MpiSession& operator=(const MpiSession&) = delete;

private:
    std::unique_ptr<HeartbeatPump> heartbeat_;
};

// Whether kiln's guard against Open MPI 5.0's crash inside a communicator's
// creation hit by a second failure is armed, and how often it acted
// (revoke_guard.h), in words.
std::string revokeGuardStatus();

class World {
public:
    // Where a rank's node comes from: Slurm's SLURMD_NODENAME (when every rank
    // has it), else consecutive ranks grouped by ranksPerNode (> 0: emulated
    // nodes), else the host name.
    enum class NodeSource { Slurm, Emulated, Host };
    // Collective over MPI_COMM_WORLD.
    explicit World(int ranksPerNode);
    // On a process started to join a running job (see spawn.hpp): a world
    // not joined yet. It knows this host's share of the processes started
    // with it (ranksOnHost, rankOnHost), and nothing else until join().
    struct NotJoinedYet {};
    explicit World(NotJoinedYet);
    ~World();
    World(const World&) = delete;
    World& operator=(const World&) = delete;

    MPI_Comm control() const { return control_; }
    int rank() const { return rank_; }
    int size() const { return size_; }
    const std::string& host() const { return host_; }
    const NodeMap& nodes() const { return nodes_; }
    int node() const { return nodes_.nodeOfRank[members_[rank_]]; }
    NodeSource nodeSource() const { return nodeSource_; }
    bool faultTolerant() const { return faultTolerant_; }
    // Processes of this job on this host (they share its cores), at start-up.
    int ranksOnHost() const { return ranksOnHost_; }
    // This process's place among them (0-based): which of the host's GPUs it uses.
    int rankOnHost() const { return rankOnHost_; }
    // The rank this process had at start-up, and the start-up ranks of the
    // current members of control() (they change after failures).
    int originalRank() const { return members_[rank_]; }
    const std::vector<int>& members() const { return members_; }
    // The node (start-up numbering) of a start-up rank.
    int nodeOfOriginal(int originalRank) const { return nodes_.nodeOfRank[originalRank]; }
    // The host and process id of each start-up rank (to fence a rank declared dead).
    const std::string& hostOf(int originalRank) const { return hosts_[static_cast<std::size_t>(originalRank)]; }
    long pidOf(int originalRank) const { return pids_[static_cast<std::size_t>(originalRank)]; }
    // Replaces the control communicator by `survivors`, whose members had the
    // start-up ranks `members` (in survivors' rank order). Frees the old one.
    void replaceControl(MPI_Comm survivors, std::vector<int> members);
    // Collective over `merged`: control() with the processes it spawned after
    // it (spawn.hpp). They become members with the next start-up ranks, on new
    // nodes of `ranksPerNode` ranks each (consecutive spawned ranks), and
    // `merged` becomes control(). Returns their new node ids.
    std::vector<int> grow(MPI_Comm merged, int ranksPerNode);
    // On a World(NotJoinedYet): collective with the job's grow() over
    // `merged`; this process gets the next free start-up rank, its node a new
    // node id, and `merged` becomes control().
    void join(MPI_Comm merged);

private:
    // What grow() and the spawned side share: the tables, sent by rank 0 of
    // `merged`, extended by the processes after the first `members_.size()`.
    std::vector<int> adopt(MPI_Comm merged, int ranksPerNode, bool spawned);  // ranksPerNode: rank 0's counts
    void countRanksOnHost(MPI_Comm comm);
    // The members on this host, for the pump to end when stopped (heartbeat.hpp: watchHost).
    void watchHostMates() const;

    MPI_Comm control_ = MPI_COMM_NULL;
    int rank_ = 0;
    int size_ = 1;
    std::string host_;
    NodeMap nodes_;  // start-up ranks and nodes
    std::vector<std::string> hosts_;
    std::vector<long> pids_;
    std::vector<int> members_;
    NodeSource nodeSource_ = NodeSource::Host;
    bool faultTolerant_ = false;
    int ranksOnHost_ = 1, rankOnHost_ = 0;
};

// After a run that saw process failures, MPI_Finalize can wait forever for a
// failed process that the runtime never marked terminated (Open MPI #9434;
// seen here, intermittently, after a beyond-f stop). A job must end on its
// own: this arms a watchdog that ends the process with `exitCode` if it is
// still alive `seconds` from now (finalize included). `after` says what came
// before, for the warning ("process failures", "the run's end").
void armExitWatchdog(int exitCode, double seconds, const char* after = "process failures");

// The MPI library's own version string (one line).
std::string mpiLibraryVersion();

// The names of the nodes of these start-up ranks (MPI_COMM_WORLD's), each once, sorted: what a launcher may
// exclude. None where nodes are emulated on one machine, or in a process admitted after the start.
std::vector<std::string> nodeNamesOfStartupRanks(const std::vector<int>& ranks);

}  // namespace kiln::comm
