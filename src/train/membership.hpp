// Who is in the job: the nodes it started with, those retired since (failed,
// or stragglers taken out), the stragglers among them that may come back, the
// members the running layout was made for, and what that layout tolerates and
// keeps in reserve. Every member holds the same, because it changes only in
// the collective steps that change the layout: a recovery, an admission, a
// straggler retired or taken back. The live ranks of a retired node stay
// members of the control communicator without work until the job ends
// (benched, fault/recovery.hpp).
//
// It reads the world through a Roster, so that its rules have unit tests
// without MPI (tests/unit/test_membership.cpp). Private to train/.
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <vector>

namespace kiln::comm {
class World;
}

namespace kiln::train {

struct JoinState;

// What Membership reads of the world, as it is now: a view, nothing copied
// (it is read every step, with up to tens of thousands of members).
struct Roster {
    const std::vector<int>& members;     // start-up ranks of the control communicator, by rank
    const std::vector<int>& nodeOfRank;  // start-up node of each start-up rank
    int numNodes = 0;                    // node ids are 0 .. numNodes - 1, admitted nodes included
    int self = 0;                        // this process's start-up rank
};
Roster rosterOf(const comm::World& world);

// Nodes in node order: their start-up ids, and their live ranks as ranks of
// the control communicator.
struct LiveNodes {
    std::vector<int> ids;
    std::vector<std::vector<int>> ranks;
};

class Membership {
public:
    explicit Membership(std::function<Roster()> roster) : roster_(std::move(roster)) {}

    // --- Who is in the job now.
    // The nodes that work or wait as spares: live ranks, not retired.
    LiveNodes live() const;
    std::size_t liveCount() const;  // how many, without listing them
    // Every node with a live rank, retired ones included.
    LiveNodes withLiveRanks() const;
    bool retired(int node) const { return retired_.count(node) > 0; }
    const std::set<int>& retiredNodes() const { return retired_; }
    // Retired nodes whose ranks still live (members without work).
    std::set<int> benchedNodes() const;
    // The start-up rank that speaks for the job (writes diag.h5, logs): the
    // lowest member on a node that is not retired, else the lowest member.
    int speaker() const;

    // --- Stragglers retired with all their ranks alive: they probe their
    // speed every step, against the reference node, to be taken back.
    const std::set<int>& stragglers() const { return stragglers_; }
    // The probes' yardstick: the lowest idle node of the layout (a spare
    // probes for free), else the lowest live node.
    int referenceNode(const std::vector<int>& idleNodes) const;
    // A straggler that lost a rank cannot come back whole: it stops probing.
    void forgetBrokenStragglers(std::uint32_t ranksPerNode);

    // --- The running layout.
    // The start-up ranks its rank numbers stand for.
    const std::vector<int>& layoutMembers() const { return layoutMembers_; }
    // A new layout (or the same one with new members) is made for the members now.
    void layoutMadeForMembers() { layoutMembers_ = roster_().members; }
    // Each rank of `nodes` as a rank of the running layout (-1: not in it).
    std::vector<std::vector<int>> layoutRanks(const LiveNodes& nodes) const;
    std::uint32_t tolerance() const { return tolerance_; }  // simultaneous node failures it survives
    std::uint32_t spares() const { return spares_; }        // idle nodes it keeps in reserve
    void layoutTolerates(std::uint32_t tolerance, std::uint32_t spares) {
        tolerance_ = tolerance;
        spares_ = spares;
    }

    // --- Counts since start-up.
    std::uint32_t startupNodes() const { return startupNodes_; }  // what the plan was made for
    std::uint64_t failures() const { return failures_; }          // nodes retired, failed or slow

    // --- Changes, made alike on every member.
    void start(std::uint32_t nodes, std::uint32_t tolerance, std::uint32_t spares);
    // Nodes a recovery round retired (fault::recover's report).
    void retireFailed(const std::vector<int>& nodes);
    void retireStraggler(int node);
    // A retired straggler whose probes say it recovered: a live node again.
    void takeBack(int node);
    // True once, the first time this process finds its own node retired.
    bool newlyBenched();

    // The part of the run's state an admitted process takes over.
    void writeTo(JoinState& join) const;
    void readFrom(const JoinState& join);

private:
    LiveNodes nodesWithLiveRanks(bool skipRetired) const;

    std::function<Roster()> roster_;
    std::set<int> retired_;
    std::set<int> stragglers_;
    std::vector<int> layoutMembers_;
    std::uint32_t tolerance_ = 0, spares_ = 0, startupNodes_ = 0;
    std::uint64_t failures_ = 0;
    bool benchSaid_ = false;
};

}  // namespace kiln::train
