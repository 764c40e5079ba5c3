#include "membership.hpp"

#include "kiln/comm/world.hpp"
#include "kiln/train/trainer.hpp"

#include <algorithm>

namespace kiln::train {

Roster rosterOf(const comm::World& world) {
    return {world.members(), world.nodes().nodeOfRank, world.nodes().numNodes(), world.originalRank()};
}

LiveNodes Membership::nodesWithLiveRanks(bool skipRetired) const {
    const Roster roster = roster_();
    // Grouped in one pass over the members: called every step, with up to tens of thousands of them.
    std::vector<std::vector<int>> byNode(static_cast<std::size_t>(roster.numNodes));
    for (int r = 0; r < static_cast<int>(roster.members.size()); ++r) {
        const int node = roster.nodeOfRank[static_cast<std::size_t>(roster.members[static_cast<std::size_t>(r)])];
        byNode[static_cast<std::size_t>(node)].push_back(r);
    }
    LiveNodes out;
    for (int node = 0; node < roster.numNodes; ++node) {
        auto& ranks = byNode[static_cast<std::size_t>(node)];
        if (ranks.empty() || (skipRetired && retired(node))) continue;
        out.ids.push_back(node);
        out.ranks.push_back(std::move(ranks));
    }
    return out;
}

LiveNodes Membership::live() const { return nodesWithLiveRanks(/*skipRetired=*/true); }

std::size_t Membership::liveCount() const {
    const Roster roster = roster_();
    std::vector<char> seen(static_cast<std::size_t>(roster.numNodes), 0);
    std::size_t count = 0;
    for (int r : roster.members) {
        const int node = roster.nodeOfRank[static_cast<std::size_t>(r)];
        if (seen[static_cast<std::size_t>(node)] || retired(node)) continue;
        seen[static_cast<std::size_t>(node)] = 1;
        ++count;
    }
    return count;
}

LiveNodes Membership::withLiveRanks() const { return nodesWithLiveRanks(/*skipRetired=*/false); }

std::set<int> Membership::benchedNodes() const {
    std::set<int> out;
    for (int node : withLiveRanks().ids)
        if (retired(node)) out.insert(node);
    return out;
}

int Membership::speaker() const {
    const Roster roster = roster_();
    for (int r : roster.members)
        if (!retired(roster.nodeOfRank[static_cast<std::size_t>(r)])) return r;
    return roster.members.front();  // every node retired: the job stops, and someone says so
}

int Membership::referenceNode(const std::vector<int>& idleNodes) const {
    if (!idleNodes.empty()) return *std::min_element(idleNodes.begin(), idleNodes.end());
    const auto nodes = live();
    return nodes.ids.empty() ? -1 : nodes.ids.front();
}

void Membership::forgetBrokenStragglers(std::uint32_t ranksPerNode) {
    const auto nodes = withLiveRanks();
    for (auto it = stragglers_.begin(); it != stragglers_.end();) {
        const auto at = std::find(nodes.ids.begin(), nodes.ids.end(), *it);
        const bool whole =
            at != nodes.ids.end() && nodes.ranks[static_cast<std::size_t>(at - nodes.ids.begin())].size() == ranksPerNode;
        it = whole ? std::next(it) : stragglers_.erase(it);
    }
}

std::vector<std::vector<int>> Membership::layoutRanks(const LiveNodes& nodes) const {
    const Roster roster = roster_();
    // Each start-up rank's position in the layout, looked up rather than searched for: a regroup of
    // thousands of ranks would otherwise scan the members once per rank.
    std::vector<int> position(roster.nodeOfRank.size(), -1);
    for (std::size_t i = 0; i < layoutMembers_.size(); ++i)
        if (const auto r = static_cast<std::size_t>(layoutMembers_[i]); r < position.size()) position[r] = static_cast<int>(i);
    std::vector<std::vector<int>> out;
    for (const auto& ranks : nodes.ranks) {
        std::vector<int> old;
        for (int rank : ranks) old.push_back(position[static_cast<std::size_t>(roster.members[static_cast<std::size_t>(rank)])]);
        out.push_back(std::move(old));
    }
    return out;
}

void Membership::start(std::uint32_t nodes, std::uint32_t tolerance, std::uint32_t spares) {
    startupNodes_ = nodes;
    layoutTolerates(tolerance, spares);
    layoutMadeForMembers();
}

void Membership::retireFailed(const std::vector<int>& nodes) {
    for (int node : nodes)
        if (retired_.insert(node).second) ++failures_;
}

void Membership::retireStraggler(int node) {
    if (retired_.insert(node).second) ++failures_;
    stragglers_.insert(node);
}

void Membership::takeBack(int node) {
    retired_.erase(node);
    stragglers_.erase(node);
    const Roster roster = roster_();
    // Benched again later, it says so again.
    if (roster.nodeOfRank[static_cast<std::size_t>(roster.self)] == node) benchSaid_ = false;
}

bool Membership::newlyBenched() {
    const Roster roster = roster_();
    if (benchSaid_ || !retired(roster.nodeOfRank[static_cast<std::size_t>(roster.self)])) return false;
    benchSaid_ = true;
    return true;
}

void Membership::writeTo(JoinState& join) const {
    join.startupNodes = startupNodes_;
    join.tolerance = tolerance_;
    join.spares = spares_;
    join.nodeFailures = failures_;
    join.retiredNodes.assign(retired_.begin(), retired_.end());
    join.stragglerNodes.assign(stragglers_.begin(), stragglers_.end());
}

void Membership::readFrom(const JoinState& join) {
    startupNodes_ = join.startupNodes;
    tolerance_ = join.tolerance;
    spares_ = join.spares;
    failures_ = join.nodeFailures;
    retired_ = std::set<int>(join.retiredNodes.begin(), join.retiredNodes.end());
    stragglers_ = std::set<int>(join.stragglerNodes.begin(), join.stragglerNodes.end());
    layoutMadeForMembers();
}

}  // namespace kiln::train
