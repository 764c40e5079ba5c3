// The layer migration plan of a layout change, as every rank computes it:
// after any one node of three is lost, every layer some survivor held reaches
// every new holder that lacks it, from a survivor, exactly once; a rank that
// keeps its layers as the same shard receives nothing; and a layer nobody
// survived with is reported lost, not invented.
#include "kiln/plan/migration.hpp"
#include "kiln/plan/regroup.hpp"
#include "kiln/plan/templates.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

using namespace kiln::plan;

namespace {

// 3 nodes of 2 ranks (start-up ranks 0-5), a model of 6 equal layers.
TemplateSet threeNodeTemplates() {
    ModelProfile p;
    p.model.blocks = 4;
    for (int i = 0; i < 6; ++i) p.layers.push_back({"block", 1e-3, 2e-3, 1000, 1000, 1000});
    ClusterSpec c;
    c.nodes = 3;
    c.ranksPerNode = 2;
    c.stageWidth = 1;
    c.memoryPerRank = 1e12;
    c.intraBandwidth = 50e9;
    c.interBandwidth = 5e9;
    return planTemplates(p, c, 1, 8);
}

}  // namespace

TEST(Migration, EveryNewHolderGetsEachLayerItLacksFromASurvivor) {
    const auto set = threeNodeTemplates();
    const auto before = placeInstantiation(set, pinnedInstantiation(set, "2:5+1:3", 3, 2, 8, "test"), {0, 1, 2},
                                           {{0, 1}, {2, 3}, {4, 5}}, 4, 32);
    const std::vector<int> oldMembers{0, 1, 2, 3, 4, 5};
    for (int lostNode = 0; lostNode < 3; ++lostNode) {
        // The survivors, renumbered: start-up ranks of the new communicator.
        std::vector<int> members;
        std::vector<std::vector<int>> ranksOfNode;
        std::vector<int> nodeIds;
        for (int node = 0; node < 3; ++node) {
            if (node == lostNode) continue;
            nodeIds.push_back(node);
            ranksOfNode.push_back({static_cast<int>(members.size()), static_cast<int>(members.size()) + 1});
            members.push_back(2 * node);
            members.push_back(2 * node + 1);
        }
        const auto after = placeInstantiation(set, pinnedInstantiation(set, "2", 2, 1, 8, "test"), nodeIds,
                                              ranksOfNode, 4, 32);
        const auto plan = planMigration(before, oldMembers, after, members);
        ASSERT_TRUE(plan.lost.empty()) << "node " << lostNode;
        // What each new rank has after the plan: what it keeps, plus what it receives.
        const auto oldHolders = holdersOfLayers(before, oldMembers);
        std::map<std::pair<int, std::uint32_t>, int> got;  // (rank, layer) -> times received
        for (const auto& t : plan.transfers) {
            ++got[{t.to, t.layer}];
            // The sender held the layer before and survived.
            const int sender = members[static_cast<std::size_t>(t.from)];
            EXPECT_NE(std::find(oldHolders[t.layer].begin(), oldHolders[t.layer].end(), sender),
                      oldHolders[t.layer].end())
                << "layer " << t.layer << " from start-up rank " << sender;
            EXPECT_FALSE(keepsLayer(before, oldMembers, after, members, t.to, t.layer));
        }
        for (int rank = 0; rank < static_cast<int>(members.size()); ++rank) {
            const auto role = after.role(rank);
            if (role.idle()) continue;
            for (std::uint32_t l = role.firstLayer; l < role.endLayer; ++l) {
                const bool kept = keepsLayer(before, oldMembers, after, members, rank, l);
                EXPECT_EQ((got[{rank, l}] + (kept ? 1 : 0)), 1) << "node " << lostNode << " rank " << rank << " layer " << l;
            }
        }
    }
}

TEST(Migration, TheSameLayoutMovesNothing) {
    const auto set = threeNodeTemplates();
    const auto layout = placeInstantiation(set, pinnedInstantiation(set, "2+1", 3, 2, 8, "test"), {0, 1, 2},
                                           {{0, 1}, {2, 3}, {4, 5}}, 4, 32);
    const std::vector<int> members{0, 1, 2, 3, 4, 5};
    EXPECT_TRUE(planMigration(layout, members, layout, members).transfers.empty());
}

TEST(Migration, ALayerNoSurvivorHeldIsLost) {
    const auto set = threeNodeTemplates();
    // One pipeline of two nodes; its first node (ranks 0, 1) is lost: its layers are gone.
    const auto before = placeInstantiation(set, pinnedInstantiation(set, "2", 2, 1, 8, "test"), {0, 1},
                                           {{0, 1}, {2, 3}}, 4, 32);
    const auto after = placeInstantiation(set, pinnedInstantiation(set, "1", 1, 1, 8, "test"), {0}, {{0, 1}}, 4, 32);
    const auto plan = planMigration(before, {0, 1, 2, 3}, after, {2, 3});
    ASSERT_FALSE(plan.lost.empty());
    const auto role = before.role(0);
    EXPECT_EQ(plan.lost.front(), role.firstLayer);
    for (auto l : plan.lost) EXPECT_LT(l, before.role(1).endLayer);
}

TEST(Migration, LayersWithoutALiveHolder) {
    const auto set = threeNodeTemplates();
    // 2+1: a 2-node pipeline on nodes 0-1 (ranks 0-3) and a 1-node one on node 2 (ranks 4-5).
    const auto layout = placeInstantiation(set, pinnedInstantiation(set, "2+1", 3, 2, 8, "test"), {0, 1, 2},
                                           {{0, 1}, {2, 3}, {4, 5}}, 4, 32);
    const std::vector<int> members{0, 1, 2, 3, 4, 5};
    EXPECT_TRUE(layersWithoutLiveHolder(layout, members, members).empty());
    // Node 2 lost: the 2-node pipeline still holds every layer.
    EXPECT_TRUE(layersWithoutLiveHolder(layout, members, {0, 1, 2, 3}).empty());
    // Node 0 and node 2 lost: the first node's layers are gone, the second's are not.
    const auto lost = layersWithoutLiveHolder(layout, members, {2, 3});
    ASSERT_FALSE(lost.empty());
    for (auto l : lost) EXPECT_LT(l, layout.role(2).firstLayer);
    EXPECT_EQ(lost.front(), 0u);
    // Whether a layout runs an instantiation: its own, yes; another split, no.
    EXPECT_TRUE(runs(layout, pinnedInstantiation(set, "2+1", 3, 2, 8, "test")));
    EXPECT_FALSE(runs(layout, pinnedInstantiation(set, "1+1+1", 3, 2, 8, "test")));
}
