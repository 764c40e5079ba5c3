// The planner against exhaustive search on small instances: templates are
// optimal for the cost model, microbatch distribution and template selection
// are optimal, and every set of up to f failed nodes leaves survivors that
// regroup into pipelines from the same templates with every layer surviving.
#include "kiln/base/error.hpp"
#include "kiln/io/hdf5.hpp"
#include "kiln/plan/instantiation.hpp"
#include "kiln/plan/layout.hpp"
#include "kiln/plan/layout_packing.hpp"
#include "kiln/plan/plan_file.hpp"
#include "kiln/plan/plan_fingerprint.hpp"
#include "kiln/plan/regroup.hpp"
#include "kiln/plan/run_plan.hpp"
#include "../support/error_text.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <functional>
#include <random>

using namespace kiln::plan;
using kiln::test::errorOf;

namespace {

ModelProfile randomProfile(std::mt19937& rng, std::uint32_t layers) {
    ModelProfile p;
    p.model.blocks = layers - 2;
    p.microBatch = 1;
    std::uniform_real_distribution<double> time(0.5e-3, 5e-3);
    std::uniform_int_distribution<std::uint64_t> bytes(1'000'000, 9'000'000);
    for (std::uint32_t i = 0; i < layers; ++i) {
        const double f = time(rng);
        p.layers.push_back({"block", f, f * std::uniform_real_distribution<double>(1.5, 3.0)(rng), bytes(rng), bytes(rng) / 3,
                            bytes(rng)});
    }
    return p;
}

// Stages of one rank unless `stageWidth` says otherwise (0: the planner chooses).
ClusterSpec cluster(std::uint32_t nodes, double memory, std::uint32_t ranksPerNode = 1, std::uint32_t stageWidth = 1) {
    ClusterSpec c;
    c.nodes = nodes;
    c.ranksPerNode = ranksPerNode;
    c.stageWidth = stageWidth;
    c.memoryPerRank = memory;
    c.intraBandwidth = 50e9;
    c.interBandwidth = 5e9;
    return c;
}

}  // namespace

TEST(Templates, OptimalAgainstExhaustiveSearch) {
    std::mt19937 rng(21);
    int compared = 0;
    for (int trial = 0; trial < 60; ++trial) {
        const std::uint32_t layers = 3 + rng() % 7;
        const auto profile = randomProfile(rng, layers);
        // Tight memory in some trials: some partitions are ruled out. Every
        // other trial has 2 ranks (stages) per node.
        // One width (the exhaustive search is for one): the widths are compared below.
        auto c = cluster(layers + 2, trial % 3 == 0 ? 7e7 : 1e12, 1 + trial % 2);
        c.stageWidth = 1;
        const std::uint64_t microbatches = 1 + rng() % 12;
        const std::uint64_t global = microbatches * c.nodes;
        TemplateSet set;
        try {
            set = planTemplates(profile, c, 0, global);
        } catch (const kiln::InputError&) {
            for (std::uint32_t n = 1; n <= layers; ++n) {
                bool any = false;
                exhaustiveTemplate(profile, c, n, referenceMicrobatches(n, c, global), any);
                EXPECT_FALSE(any) << "planner found no template where exhaustive search did, n=" << n;
            }
            continue;
        }
        for (std::uint32_t n = 1; n <= layers; ++n) {
            const PipelineTemplate* t = set.forNodes(n);
            bool found = false;
            const std::uint64_t m = referenceMicrobatches(n, c, global);
            const auto best = exhaustiveTemplate(profile, c, n, m, found);
            if (!t) {
                EXPECT_FALSE(found) << "exhaustive search fits " << n << " nodes, the planner has no template";
                continue;
            }
            EXPECT_EQ(t->referenceMicrobatches, m);
            EXPECT_EQ(t->stages.size(), n * c.ranksPerNode);
            ASSERT_TRUE(found) << "n=" << n;
            EXPECT_NEAR(t->pipelineTime(m), best.pipelineTime(m), 1e-12 * best.pipelineTime(m)) << "trial " << trial << " n=" << n;
            for (const auto& s : t->stages) EXPECT_LE(s.memory, c.memoryPerRank);
            ++compared;
        }
    }
    EXPECT_GT(compared, 110);
}

// The cost model by hand: 2 nodes of 2 ranks, 4 equal layers, one per stage.
// Stage 0 sends to the rank beside it (intra-node), stage 1 to the next node,
// stage 2 again beside it, stage 3 nowhere; the sync is per node.
// fault.f only bounds the longest pipeline: the templates for f are those for any f up to nodes - f x the
// smallest, the same templates, stage by stage; and the cache kiln simulate plans through gives the same
// sets as planning afresh.
TEST(Templates, ToleranceOnlyBoundsTheRange) {
    std::mt19937 rng(8);
    int restricted = 0;
    for (int trial = 0; trial < 30; ++trial) {
        const auto profile = randomProfile(rng, 4 + rng() % 6);
        const auto c = cluster(2 + rng() % 9, trial % 3 == 0 ? 2.5e7 : 1e12);
        TemplateSet any;
        try {
            any = planTemplatesForAnyF(profile, c, 8);
        } catch (const kiln::InputError&) {
            continue;
        }
        TemplateCache cache;
        for (std::uint32_t f = 0; f <= 3; ++f) {
            if ((f + 1) * any.minNodes > c.nodes) {
                EXPECT_THROW(restrictToTolerance(any, c, f), kiln::InputError);
                continue;
            }
            const auto set = restrictToTolerance(any, c, f);
            const std::uint32_t limit = c.nodes - f * any.minNodes;
            EXPECT_EQ(set.minNodes, any.minNodes);
            EXPECT_LE(set.maxNodes, limit);
            EXPECT_NE(set.templates.back().nodes, 0u) << "the longest template is one that fits";
            for (std::uint32_t n = set.maxNodes + 1; n <= std::min(limit, any.maxNodes); ++n)
                EXPECT_EQ(any.templates[n - any.minNodes].nodes, 0u) << "template " << n << " left out, though it fits";
            for (std::uint32_t n = set.minNodes; n <= set.maxNodes; ++n)
                EXPECT_EQ(set.templates[n - set.minNodes].stages.size(), any.templates[n - any.minNodes].stages.size());
            for (const auto& t : set.alternatives) EXPECT_LE(t.nodes, set.maxNodes);
            if (set.maxNodes < any.maxNodes) ++restricted;
            const auto cached = restrictToTolerance(cache.forAnyF(profile, c, 8), c, f);
            EXPECT_EQ(fingerprintOf(cached).digest(), fingerprintOf(planTemplates(profile, c, f, 8)).digest());
            EXPECT_EQ(fingerprintOf(cached).digest(), fingerprintOf(set).digest());
        }
    }
    EXPECT_GT(restricted, 5) << "the trials must include clusters where f shortens the range";
}

TEST(Templates, StageCostsFollowTheLinks) {
    ModelProfile p;
    p.model.blocks = 2;
    for (int i = 0; i < 4; ++i) p.layers.push_back({"block", 1e-3, 2e-3, 1'000'000, 500'000, 1'000'000});
    ClusterSpec c = cluster(2, 1e12, 2);
    c.intraBandwidth = 1e9;  // 1 ms for the 2 x 0.5 MB of an activation and its gradient
    c.interBandwidth = 1e8;  // 10 ms
    const auto set = planTemplates(p, c, 0, 4);
    ASSERT_EQ(set.maxNodes, 2u) << "2 nodes x 2 ranks need 4 layers: the largest template";
    const auto* t = set.forNodes(2);
    ASSERT_NE(t, nullptr);
    ASSERT_EQ(t->stages.size(), 4u);
    EXPECT_NEAR(t->stages[0].time, 3e-3 + 1e-3, 1e-12);
    EXPECT_NEAR(t->stages[1].time, 3e-3 + 1e-2, 1e-12);
    EXPECT_NEAR(t->stages[2].time, 3e-3 + 1e-3, 1e-12);
    EXPECT_NEAR(t->stages[3].time, 3e-3, 1e-12);
    // Each stage's 1 MB summed across replicas: 2 MB through the node link each, 2 stages per node.
    EXPECT_NEAR(t->sync(), 2 * 2e6 / 1e8, 1e-12);
    // Memory is not divided among a node's ranks: each holds its own stage whole. The last stage keeps one
    // microbatch in flight: its layer's 1 MB and the 0.5 MB it received; the first keeps four of its own. Both
    // add one layer's weights (1 MB) for the temporaries of the backward pass and the update.
    EXPECT_NEAR(t->stages[3].memory, 4.0 * 1e6 + 1 * (1e6 + 5e5) + 1e6, 1e-6);
    EXPECT_NEAR(t->stages[0].memory, 4.0 * 1e6 + 4 * 1e6 + 1e6, 1e-6);
}

// The temporaries are the largest layer's weights on the stage, whatever the
// number of layers: the update runs layer by layer.
TEST(Templates, StageMemoryCountsTheLargestLayersTemporaries) {
    ModelProfile p;
    p.model.blocks = 2;
    p.layers.push_back({"embedding", 1e-3, 2e-3, 3'000'000, 500'000, 100'000});
    p.layers.push_back({"block", 1e-3, 2e-3, 1'000'000, 500'000, 100'000});
    p.layers.push_back({"block", 1e-3, 2e-3, 2'000'000, 500'000, 100'000});
    p.layers.push_back({"output", 1e-3, 2e-3, 1'000'000, 500'000, 100'000});
    const auto set = planTemplates(p, cluster(1, 1e12, 1), 0, 1);
    const auto* t = set.forNodes(1);
    ASSERT_NE(t, nullptr);
    ASSERT_EQ(t->stages.size(), 1u);
    EXPECT_NEAR(t->stages[0].updateBytes, 3e6, 1e-6);
    EXPECT_NEAR(t->stages[0].memory, 4.0 * 7e6 + 4e5 + 3e6, 1e-6);
    Stage lastTwo;
    lastTwo.paramBytes = 3e6;
    lastTwo.activationBytes = 2e5;
    lastTwo.updateBytes = 2e6;
    EXPECT_NEAR(lastTwo.memoryWith(3), 4.0 * 3e6 + 3 * 2e5 + 2e6, 1e-6);
}

// train.recompute: full keeps each layer's input (the ids, 8 bytes a token, for the embedding) and rebuilds one
// layer at a time (1.5 times its activations beside the stage); auto recomputes exactly the stages that would
// not fit otherwise, and every stage of every template fits.
TEST(Templates, RecomputationKeepsInputsAndAutoRecomputesOnlyWhatWouldNotFit) {
    ModelProfile p;
    p.model.blocks = 4;
    p.model.seqLen = 10;
    p.microBatch = 1;
    p.layers.push_back({"embedding", 1e-3, 2e-3, 1'000'000, 40'000, 40'000});
    for (int b = 0; b < 4; ++b) p.layers.push_back({"block", 1e-3, 2e-3, 1'000'000, 40'000, 3'000'000});
    p.layers.push_back({"output", 1e-3, 2e-3, 1'000'000, 40'000, 400'000});
    p.model.recompute = kiln::arch::ModelConfig::Recompute::Full;
    const auto full = planTemplates(p, cluster(1, 1e12), 0, 1);
    const Stage& one = full.forNodes(1)->stages[0];
    EXPECT_TRUE(one.recompute);
    EXPECT_NEAR(one.activationBytes, 8.0 * 10 + 5 * 40'000, 1e-6);
    EXPECT_NEAR(one.memory, 4.0 * 6e6 + one.activationBytes + 1e6 + 1.5 * 3e6, 1e-6);
    EXPECT_NEAR(one.compute, 6 * (2 * 1e-3 + 2e-3), 1e-12);  // every forward twice

    // Two nodes with 4 microbatches: the first stage keeps 2 in flight, the second 1.
    p.model.recompute = kiln::arch::ModelConfig::Recompute::Auto;
    const double limit = 4.0 * 3e6 + 1e6 + 1.5 * 3e6 + 0.9e6 + 2 * 8e6;
    const auto set = planTemplates(p, cluster(2, limit), 0, 4);
    int recomputed = 0, kept = 0;
    for (std::uint32_t n = set.minNodes; n <= set.maxNodes; ++n) {
        const auto* t = set.forNodes(n);
        if (!t) continue;
        for (const auto& stage : t->stages) {
            EXPECT_LE(stage.memory, limit);
            // Recomputed exactly where it would not fit otherwise.
            p.model.recompute = kiln::arch::ModelConfig::Recompute::None;
            Stage plain = stage;
            double activations = 0.0;
            for (std::uint32_t l = stage.firstLayer; l < stage.endLayer; ++l) activations += double(p.layers[l].activationBytes);
            plain.activationBytes = activations + (stage.firstLayer > 0 ? 40'000.0 : 0.0);
            plain.runtimeBytes = 0.0;
            const std::uint64_t inFlight = std::min<std::uint64_t>(t->stages.size() - (&stage - t->stages.data()), 4);
            EXPECT_EQ(stage.recompute, plain.memoryWith(inFlight) > limit) << "template " << n << ", layers "
                                                                           << stage.firstLayer << "-" << stage.endLayer;
            ++(stage.recompute ? recomputed : kept);
        }
    }
    EXPECT_GT(recomputed, 0);  // the case is one that needs both
    EXPECT_GT(kept, 0);
}

// With the width free, each template is the best of the exhaustive searches
// over every width (here 1, 2 and 4 ranks per stage on nodes of 4).
TEST(Templates, BestWidthAgainstExhaustiveSearch) {
    std::mt19937 rng(8);
    int compared = 0, split = 0;
    for (int trial = 0; trial < 20; ++trial) {
        const std::uint32_t layers = 4 + rng() % 5;
        auto profile = randomProfile(rng, layers);
        auto c = cluster(3, trial % 2 == 0 ? 1e12 : 3e7, 4, 0);
        c.intraBandwidth = trial % 3 == 0 ? 1e6 : 1e12;  // tensor sums from prohibitive to free
        const std::uint64_t global = 2 + rng() % 8;
        TemplateSet set;
        try {
            set = planTemplates(profile, c, 0, global);
        } catch (const kiln::InputError&) {
            continue;
        }
        for (std::uint32_t n = set.minNodes; n <= set.maxNodes; ++n) {
            const PipelineTemplate* t = set.forNodes(n);
            const std::uint64_t m = referenceMicrobatches(n, c, global);
            double best = 1e300;
            for (std::uint32_t w : {1u, 2u, 4u}) {
                auto cw = c;
                cw.stageWidth = w;
                bool found = false;
                const auto e = exhaustiveTemplate(profile, cw, n, m, found);
                if (found) best = std::min(best, e.pipelineTime(m));
            }
            if (!t) continue;
            EXPECT_NEAR(t->pipelineTime(m), best, 1e-12 * best) << "trial " << trial << " n=" << n;
            EXPECT_EQ(t->stages.size(), n * 4 / t->width);
            split += t->width > 1;
            ++compared;
        }
    }
    EXPECT_GT(compared, 20);
    EXPECT_GT(split, 0) << "no template chose split stages";
}

TEST(PlannerErrors, FewerLayersThanStagesOfANode) {
    std::mt19937 rng(4);
    const auto profile = randomProfile(rng, 3);
    // Stages of 2 or 4 ranks fit 3 layers on a node of 4.
    const auto set = planTemplates(profile, cluster(2, 1e12, 4, 0), 0, 4);
    ASSERT_NE(set.forNodes(1), nullptr);
    EXPECT_GE(set.forNodes(1)->width, 2u);
    const auto oneRankStages = cluster(2, 1e12, 4);
    const std::string error = errorOf([&] { planTemplates(profile, oneRankStages, 0, 4); });
    EXPECT_NE(error.find("a node's 4 ranks hold at least 4 stages (1 rank wide), but the model has only 3 layers"),
              std::string::npos)
        << error;
    EXPECT_NE(error.find("model.blocks >= 2"), std::string::npos) << error;
}

// plan.pipelines pins widths per pipeline: '1w2+1w1' places a 2-wide stage
// beside two one-rank stages; a width that does not divide the node, or
// that no template has, is refused with the item named.
TEST(Layout, PinnedWidthsPerPipeline) {
    ModelProfile p;
    p.model.blocks = 4;
    for (int i = 0; i < 6; ++i) p.layers.push_back({"block", 1e-3, 2e-3, 1000, 1000, 1000});
    const auto set = planTemplates(p, cluster(3, 1e12, 2, 0), 1, 8);
    const auto inst = pinnedInstantiation(set, "1w2:5+1w1:3", 3, 2, 8, "deck.ini:9");
    ASSERT_EQ(inst.pipelines.size(), 2u);
    EXPECT_EQ(inst.pipelines[0].width, 2u);
    EXPECT_EQ(inst.pipelines[1].width, 1u);
    const Layout layout = placeInstantiation(set, inst, {0, 1, 2}, {{0, 1}, {2, 3}, {4, 5}}, 4, 32);
    EXPECT_EQ(layout.describe(), "1+1 (1x2+2x1 stages x ranks)");
    EXPECT_EQ(layout.atoms(), 2u);
    EXPECT_EQ(layout.role(1).slot, 1u);
    EXPECT_EQ(layout.role(1).width, 2u);
    EXPECT_EQ(layout.role(3).stage, 1u);
    // One segment per layer range cut by either pipeline: atom 1 of layers 0-2 is on rank 1 and rank 2.
    ASSERT_FALSE(layout.segments.empty());
    EXPECT_EQ(layout.segments[0].holdersOfAtom(1, 2), (std::vector<int>{1, 2}));
    EXPECT_EQ(layout.primaryHolders(0), (std::vector<int>{0, 1}));
    const std::string notDividing = errorOf([&] { pinnedInstantiation(set, "1w3+1", 3, 2, 8, "deck.ini:9"); });
    EXPECT_NE(notDividing.find("deck.ini:9: plan.pipelines = '1w3+1'"), std::string::npos) << notDividing;
    EXPECT_NE(notDividing.find("a stage 3 ranks wide does not divide a node's 2 ranks"), std::string::npos) << notDividing;
    auto one = cluster(3, 1e12, 2);  // stage width pinned to 1: no 2-wide templates
    const auto narrow = planTemplates(p, one, 1, 8);
    const std::string missing = errorOf([&] { pinnedInstantiation(narrow, "1w2+1", 3, 2, 8, "deck.ini:9"); });
    EXPECT_NE(missing.find("no 1-node pipeline of stages 2 ranks wide fits"), std::string::npos) << missing;
    // The plan file keeps the pinned widths' templates.
    const std::string path = "/tmp/kiln-plan-widths-" + std::to_string(::getpid()) + ".h5";
    writePlan(path, set, inst, 3, 1, 8);
    TemplateSet back;
    Instantiation backInst;
    readPlan(path, back, backInst);
    std::remove(path.c_str());
    ASSERT_EQ(backInst.pipelines.size(), 2u);
    for (std::size_t k = 0; k < 2; ++k) {
        const auto* t = backInst.pipelines[k].templateIn(back);
        ASSERT_NE(t, nullptr) << k;
        EXPECT_EQ(t->width, inst.pipelines[k].templateIn(set)->width);
        EXPECT_EQ(t->stages.size(), inst.pipelines[k].templateIn(set)->stages.size());
    }
}

TEST(PlannerErrors, StageWidthMustDivideTheNode) {
    std::mt19937 rng(4);
    const auto profile = randomProfile(rng, 6);
    auto c = cluster(2, 1e12, 4);
    c.stageWidth = 3;
    const std::string error = errorOf([&] { planTemplates(profile, c, 0, 4); });
    EXPECT_NE(error.find("plan.stage_width = 3 does not divide a node's 4 ranks"), std::string::npos) << error;
}

TEST(Instantiation, DistributionAndSelectionAreOptimal) {
    std::mt19937 rng(5);
    for (int trial = 0; trial < 25; ++trial) {
        const auto profile = randomProfile(rng, 6);
        const std::uint32_t nodes = 3 + rng() % 6, f = rng() % 2;
        const std::uint64_t microbatches = 2 + rng() % 14;
        TemplateSet set;
        try {
            set = planTemplates(profile, cluster(nodes, 1e12), f, microbatches);
        } catch (const kiln::InputError&) {
            continue;
        }
        const auto inst = instantiate(set, nodes, f + 1, microbatches);
        EXPECT_GE(inst.pipelines.size(), f + 1);
        std::uint64_t total = 0;
        for (const auto& p : inst.pipelines) total += p.microbatches;
        EXPECT_EQ(total, microbatches);
        // Brute force: every multiset of template sizes with >= f+1 pipelines on <= nodes,
        // every split of the microbatches among them.
        double best = 1e300;
        std::vector<std::uint32_t> sizes;
        std::function<void(std::uint32_t, std::uint32_t)> pick = [&](std::uint32_t from, std::uint32_t left) {
            if (sizes.size() >= f + 1) {
                std::vector<std::uint64_t> m(sizes.size(), 0);
                std::function<void(std::size_t, std::uint64_t)> split = [&](std::size_t p, std::uint64_t rest) {
                    if (p + 1 == sizes.size()) {
                        m[p] = rest;
                        double worst = 0;
                        for (std::size_t q = 0; q < sizes.size(); ++q)
                            worst = std::max(worst, set.forNodes(sizes[q])->stepTime(m[q]));
                        best = std::min(best, worst);
                        return;
                    }
                    for (std::uint64_t k = 0; k <= rest; ++k) {
                        m[p] = k;
                        split(p + 1, rest - k);
                    }
                };
                split(0, microbatches);
            }
            for (std::uint32_t n = from; n <= std::min(set.maxNodes, left); ++n) {
                if (!set.forNodes(n)) continue;
                sizes.push_back(n);
                pick(n, left - n);
                sizes.pop_back();
            }
        };
        pick(set.minNodes, nodes);
        EXPECT_NEAR(inst.stepTime, best, 1e-9 * best) << "trial " << trial;
    }
}

// Pass criterion: for every set of at most f failed nodes, (a) some pipeline of
// the instantiation lost no node, so every layer has a surviving copy, and (b)
// the survivors regroup into at least f + 1 - k pipelines from the same templates.
TEST(Guarantee, EverySetOfUpToFFailuresRegroups) {
    std::mt19937 rng(8);
    for (std::uint32_t nodes = 3; nodes <= 9; ++nodes) {
        for (std::uint32_t f = 1; f <= 3; ++f) {
            const auto profile = randomProfile(rng, 5);
            TemplateSet set;
            try {
                set = planTemplates(profile, cluster(nodes, 1e12), f, 8);
            } catch (const kiln::InputError& e) {
                EXPECT_GT(std::uint64_t(f + 1), nodes) << e.what();  // only refused when f+1 pipelines cannot fit
                continue;
            }
            const auto inst = instantiate(set, nodes, f + 1, 8);
            // Placed on real nodes (one rank each), as kiln run places it.
            std::vector<int> nodeIds;
            std::vector<std::vector<int>> ranksOfNode;
            for (std::uint32_t n = 0; n < nodes; ++n) {
                nodeIds.push_back(int(n));
                ranksOfNode.push_back({int(n)});
            }
            const Layout layout = placeInstantiation(set, inst, nodeIds, ranksOfNode, 1, 8);
            for (std::uint32_t mask = 1; mask < (1u << nodes); ++mask) {
                const auto k = static_cast<std::uint32_t>(__builtin_popcount(mask));
                if (k > f) continue;
                // (a) every layer keeps a holder on a surviving node.
                for (const auto& segment : layout.segments) {
                    bool survives = false;
                    for (int rank : segment.holders) survives |= !(mask >> rank & 1);
                    EXPECT_TRUE(survives) << "layers " << segment.firstLayer << "-" << segment.endLayer - 1
                                          << " lost every holder: " << nodes << " nodes, f=" << f << ", failed mask " << mask;
                }
                // (b) the survivors regroup into pipelines from the same templates.
                const auto after = instantiate(set, nodes - k, f + 1 - k, 8);
                EXPECT_GE(after.pipelines.size(), f + 1 - k);
                std::uint32_t used = 0;
                for (const auto& p : after.pipelines) {
                    ASSERT_NE(set.forNodes(p.nodes), nullptr) << "regrouped into a pipeline that is not a template";
                    used += p.nodes;
                }
                EXPECT_LE(used, nodes - k);
            }
        }
    }
}

TEST(PlannerErrors, SayWhatWouldFit) {
    std::mt19937 rng(2);
    const auto profile = randomProfile(rng, 6);
    const std::string tooBig = errorOf([&] { planTemplates(profile, cluster(4, 1e6), 0, 4); });
    EXPECT_NE(tooBig.find("the model does not fit on 4 nodes"), std::string::npos) << tooBig;
    EXPECT_NE(tooBig.find("GB on a rank"), std::string::npos) << tooBig;
    const std::string tooManyFailures = errorOf([&] { planTemplates(profile, cluster(4, 1e12), 4, 4); });
    EXPECT_NE(tooManyFailures.find("fault.f = 4 needs f+1 = 5 pipelines"), std::string::npos) << tooManyFailures;
    EXPECT_NE(tooManyFailures.find("fault.f can be at most 3"), std::string::npos) << tooManyFailures;
    kiln::arch::ModelConfig other;
    other.blocks = 9;
    other.dModel = 64;
    const std::string mismatch = errorOf([&] { requireSameModel(profile, other, "p.h5"); });
    EXPECT_NE(mismatch.find("p.h5 profiles another model"), std::string::npos) << mismatch;
    EXPECT_NE(mismatch.find("model.blocks is 4 in the profile but 9 in the deck"), std::string::npos) << mismatch;
}

// Memory bounds the distribution: 4 one-layer stages fit 2 microbatches in
// flight (4000 bytes of weights, gradients and moments + 2 x 1000), not 3.
TEST(Instantiation, NoPipelineTakesMoreMicrobatchesThanFit) {
    ModelProfile p;
    p.model.blocks = 2;
    for (int i = 0; i < 4; ++i) p.layers.push_back({"block", 1e-3, 2e-3, 1000, 0, 1000});
    const auto set = planTemplates(p, cluster(8, 7000, 1), 1, 4);
    ASSERT_EQ(set.minNodes, 4u);
    EXPECT_EQ(microbatchesThatFit(*set.forNodes(4), set.memoryPerRank), 2u);
    const auto inst = instantiate(set, 8, 2, 4);
    for (const auto& share : inst.pipelines) EXPECT_LE(share.microbatches, 2u);
    // However slow one pipeline is measured, the other cannot take more than fits.
    auto skewed = inst;
    distributeMicrobatches(set, 4, skewed, {1.0, 10.0});
    EXPECT_EQ(skewed.pipelines[0].microbatches, 2u);
    EXPECT_EQ(skewed.pipelines[1].microbatches, 2u);
    const auto tooMany = errorOf([&] { instantiate(set, 8, 2, 6); });
    EXPECT_NE(tooMany.find("cannot hold the 6 microbatches"), std::string::npos) << "[" << tooMany << "]";
    // After a failure, 7 nodes hold one such pipeline: not the 4 microbatches. No layout that would not fit.
    RunPlan plan;
    plan.templates = set;
    plan.cluster = cluster(8, 7000, 1);
    plan.f = 1;
    plan.globalMicrobatches = 4;
    plan.instantiation = inst;
    const auto after = regroup(plan, 7);
    EXPECT_FALSE(after.possible);
    EXPECT_NE(after.why.find("cannot hold the 4 microbatches"), std::string::npos) << after.why;
}

TEST(ProfileFile, OneWrittenBeforeTheOptimizerColumnReads) {
    // The layout of kiln profile's rows before optimizer_s was added.
    struct OldRow {
        char kind[16];
        double forward, backward;
        std::uint64_t paramBytes, outputBytes, activationBytes;
    };
    kiln::arch::ModelConfig config;
    config.blocks = 1;
    config.vocabSize = 10;
    const std::string path = "/tmp/kiln-old-profile-" + std::to_string(::getpid()) + ".h5";
    {
        kiln::io::h5::Handle file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
        kiln::io::h5::writeAttribute(file, "format", std::string("kiln-layer-profile"));
        kiln::io::h5::writeAttribute(file, "format_version", std::int64_t{1});
        kiln::io::h5::writeAttribute(file, "device", std::string("cpu"));
        kiln::io::h5::writeAttribute(file, "micro_batch", std::uint64_t{2});
        for (const char* key : {"model_blocks", "model_d_model", "model_heads", "model_mlp_ratio", "model_vocab", "model_seq_len"}) {
            const std::string k = key;
            const std::uint64_t value = k == "model_blocks" ? config.blocks : k == "model_d_model" ? config.dModel
                                      : k == "model_heads" ? config.heads : k == "model_mlp_ratio" ? config.mlpRatio
                                      : k == "model_vocab" ? config.vocabSize : config.seqLen;
            kiln::io::h5::writeAttribute(file, key, value);
        }
        kiln::io::h5::Handle type(H5Tcreate(H5T_COMPOUND, sizeof(OldRow)));
        const auto kind = kiln::io::h5::fixedString(16, "test");
        H5Tinsert(type, "kind", HOFFSET(OldRow, kind), kind);
        H5Tinsert(type, "forward_s", HOFFSET(OldRow, forward), H5T_NATIVE_DOUBLE);
        H5Tinsert(type, "backward_s", HOFFSET(OldRow, backward), H5T_NATIVE_DOUBLE);
        H5Tinsert(type, "param_bytes", HOFFSET(OldRow, paramBytes), H5T_NATIVE_UINT64);
        H5Tinsert(type, "output_bytes", HOFFSET(OldRow, outputBytes), H5T_NATIVE_UINT64);
        H5Tinsert(type, "activation_bytes", HOFFSET(OldRow, activationBytes), H5T_NATIVE_UINT64);
        std::vector<OldRow> rows = {{"embedding", 1e-3, 2e-3, 40, 8, 8}, {"block", 3e-3, 6e-3, 400, 8, 80},
                                    {"output", 2e-3, 4e-3, 40, 20, 20}};
        kiln::io::h5::writeRecords(file, "layers", type, rows, path);
    }
    const auto profile = readProfile(path);
    ::unlink(path.c_str());
    ASSERT_EQ(profile.layers.size(), 3u);
    EXPECT_EQ(profile.layers[1].forwardSeconds, 3e-3);
    EXPECT_EQ(profile.layers[1].activationBytes, 80u);
    for (const auto& layer : profile.layers) EXPECT_EQ(layer.optimizerSeconds, 0.0) << layer.kind;
    EXPECT_EQ(profile.runtimeBytes, 0u) << "written before the runtime was measured";
}

// What a rank holds besides its stage (the profile's runtime, and on CPU
// runs the loader's budget) is added to every stage's memory.
TEST(ProfileFile, RuntimeBytesRoundTripAndCountOnEveryStage) {
    std::mt19937 rng(5);
    auto profile = randomProfile(rng, 6);
    profile.runtimeBytes = 13'000'000;
    const std::string path = "/tmp/kiln-profile-runtime-" + std::to_string(::getpid()) + ".h5";
    writeProfile(path, profile);
    const auto back = readProfile(path);
    ::unlink(path.c_str());
    EXPECT_EQ(back.runtimeBytes, 13'000'000u);
    auto without = back;
    without.runtimeBytes = 0;
    const auto withSet = planTemplates(back, cluster(2, 1e12), 0, 4);
    const auto bareSet = planTemplates(without, cluster(2, 1e12), 0, 4);
    const auto* with = withSet.forNodes(2);
    const auto* bare = bareSet.forNodes(2);
    ASSERT_TRUE(with && bare);
    ASSERT_EQ(with->stages.size(), bare->stages.size());
    for (std::size_t s = 0; s < with->stages.size(); ++s)
        EXPECT_NEAR(with->stages[s].memory - bare->stages[s].memory, 13e6, 1e-3) << "stage " << s;
    auto withLoader = cluster(2, 1e12);
    withLoader.loaderBytesPerRank = 5e6;
    const auto loaderSet = planTemplates(back, withLoader, 0, 4);
    ASSERT_EQ(loaderSet.forNodes(2)->stages.size(), bare->stages.size());
    for (std::size_t s = 0; s < bare->stages.size(); ++s)
        EXPECT_NEAR(loaderSet.forNodes(2)->stages[s].memoryWith(1) - bare->stages[s].memoryWith(1), 18e6, 1e-3);
}

TEST(PlanFile, RoundTrips) {
    std::mt19937 rng(3);
    const auto profile = randomProfile(rng, 7);
    auto set = planTemplates(profile, cluster(6, 1e12), 1, 10);
    // Stages that recompute (train.recompute = auto's choice) stay so.
    for (auto& t : set.templates)
        for (std::size_t s = 0; s < t.stages.size(); s += 2) t.stages[s].recompute = true;
    const auto inst = instantiate(set, 6, 2, 10);
    const std::string path = "/tmp/kiln-plan-test-" + std::to_string(::getpid()) + ".h5";
    writePlan(path, set, inst, 6, 1, 10);
    TemplateSet back;
    Instantiation backInst;
    readPlan(path, back, backInst);
    ASSERT_EQ(back.templates.size(), set.templates.size());
    for (std::uint32_t n = set.minNodes; n <= set.maxNodes; ++n) {
        ASSERT_EQ(back.forNodes(n) != nullptr, set.forNodes(n) != nullptr);
        if (!set.forNodes(n)) continue;
        EXPECT_EQ(back.forNodes(n)->stages.size(), set.forNodes(n)->stages.size());
        EXPECT_DOUBLE_EQ(back.forNodes(n)->stepTime(10), set.forNodes(n)->stepTime(10));
        for (std::size_t s = 0; s < set.forNodes(n)->stages.size(); ++s) {
            EXPECT_DOUBLE_EQ(back.forNodes(n)->stages[s].memoryWith(3), set.forNodes(n)->stages[s].memoryWith(3));
            EXPECT_EQ(back.forNodes(n)->stages[s].recompute, s % 2 == 0) << n << " nodes, stage " << s;
        }
    }
    ASSERT_EQ(backInst.pipelines.size(), inst.pipelines.size());
    EXPECT_EQ(backInst.pipelines[0].microbatches, inst.pipelines[0].microbatches);
    EXPECT_DOUBLE_EQ(backInst.stepTime, inst.stepTime);
    EXPECT_EQ(backInst.nodesIdle, inst.nodesIdle);
    std::remove(path.c_str());
}

namespace {
// 3 nodes of 2 ranks (ranks 0-5), a model of 6 equal layers.
TemplateSet threeNodeTemplates() {
    ModelProfile p;
    p.model.blocks = 4;
    for (int i = 0; i < 6; ++i) p.layers.push_back({"block", 1e-3, 2e-3, 1000, 1000, 1000});
    return planTemplates(p, cluster(3, 1e12, 2), 1, 8);
}
}  // namespace

TEST(Layout, HeterogeneousPipelinesOnNodes) {
    const auto set = threeNodeTemplates();
    ASSERT_NE(set.forNodes(2), nullptr);
    const auto inst = pinnedInstantiation(set, "2:5+1:3", 3, 2, 8, "deck.ini:9");
    const Layout layout = placeInstantiation(set, inst, {0, 1, 2}, {{0, 1}, {2, 3}, {4, 5}}, 4, 30);
    ASSERT_EQ(layout.pipelines.size(), 2u);
    EXPECT_EQ(layout.describe(), "2+1 (4+2 stages)");
    EXPECT_EQ(layout.pipelines[0].ranks, (std::vector<int>{0, 1, 2, 3}));
    EXPECT_EQ(layout.pipelines[1].ranks, (std::vector<int>{4, 5}));
    EXPECT_EQ(layout.pipelines[0].firstMicrobatch, 0u);
    EXPECT_EQ(layout.pipelines[1].firstMicrobatch, 5u);
    EXPECT_EQ(layout.pipelines[1].microbatches, 3u);
    // The last microbatch of a 30-sample batch in microbatches of 4 has 2 samples.
    EXPECT_EQ(layout.microbatchBegin(7), 28u);
    EXPECT_EQ(layout.microbatchEnd(7), 30u);
    // Roles: neighbours along each pipeline, layers of each stage cover the model once.
    for (const auto& pipeline : layout.pipelines) {
        std::uint32_t next = 0;
        for (std::size_t s = 0; s < pipeline.ranks.size(); ++s) {
            const RankRole& role = layout.roles[pipeline.ranks[s]];
            EXPECT_EQ(role.firstLayer, next);
            EXPECT_GT(role.endLayer, role.firstLayer);
            next = role.endLayer;
            EXPECT_EQ(role.previous, s == 0 ? -1 : pipeline.ranks[s - 1]);
            EXPECT_EQ(role.next, s + 1 == pipeline.ranks.size() ? -1 : pipeline.ranks[s + 1]);
        }
        EXPECT_EQ(next, 6u);
    }
    // Segments: every layer in exactly one, held by one rank of each pipeline, which holds it.
    std::uint32_t covered = 0;
    for (const auto& segment : layout.segments) {
        EXPECT_EQ(segment.firstLayer, covered);
        covered = segment.endLayer;
        ASSERT_EQ(segment.holders.size(), 2u);
        for (int rank : segment.holders) {
            EXPECT_LE(layout.roles[rank].firstLayer, segment.firstLayer);
            EXPECT_GE(layout.roles[rank].endLayer, segment.endLayer);
        }
        EXPECT_EQ(layout.primaryHolder(segment.firstLayer), segment.holders[0]);
    }
    EXPECT_EQ(covered, 6u);
}

// What a running job hands to the nodes it admits: the layout comes back whole, and a short row is refused.
TEST(Layout, PackedLayoutComesBackWhole) {
    const auto set = threeNodeTemplates();
    const auto inst = pinnedInstantiation(set, "2:5+1:3", 3, 2, 8, "deck.ini:9");
    Layout layout = placeInstantiation(set, inst, {0, 1, 2}, {{0, 1}, {2, 3}, {4, 5}}, 4, 30);
    layout.idleNodes = {7};
    layout.pipelines[1].predictedStepTime = 0.123456789;
    kiln::RowWriter out;
    packLayout(layout, out);
    kiln::RowReader in(out.row());
    const Layout back = unpackLayout(in);
    EXPECT_EQ(back.describe(), layout.describe());
    EXPECT_EQ(back.idleNodes, layout.idleNodes);
    EXPECT_DOUBLE_EQ(back.pipelines[1].predictedStepTime, 0.123456789);
    ASSERT_EQ(back.pipelines.size(), layout.pipelines.size());
    for (std::size_t p = 0; p < layout.pipelines.size(); ++p) {
        EXPECT_EQ(back.pipelines[p].ranks, layout.pipelines[p].ranks);
        EXPECT_EQ(back.pipelines[p].cuts, layout.pipelines[p].cuts);
        EXPECT_EQ(back.pipelines[p].nodeIds, layout.pipelines[p].nodeIds);
        EXPECT_EQ(back.pipelines[p].firstMicrobatch, layout.pipelines[p].firstMicrobatch);
        EXPECT_EQ(back.pipelines[p].microbatches, layout.pipelines[p].microbatches);
    }
    ASSERT_EQ(back.roles.size(), layout.roles.size());
    for (std::size_t r = 0; r < layout.roles.size(); ++r) {
        EXPECT_EQ(back.roles[r].firstLayer, layout.roles[r].firstLayer);
        EXPECT_EQ(back.roles[r].endLayer, layout.roles[r].endLayer);
        EXPECT_EQ(back.roles[r].previous, layout.roles[r].previous);
        EXPECT_EQ(back.roles[r].next, layout.roles[r].next);
        EXPECT_EQ(back.roles[r].pipeline, layout.roles[r].pipeline);
    }
    ASSERT_EQ(back.segments.size(), layout.segments.size());
    for (std::size_t i = 0; i < layout.segments.size(); ++i) EXPECT_EQ(back.segments[i].holders, layout.segments[i].holders);
    EXPECT_EQ(back.globalBatch, 30u);
    EXPECT_EQ(back.microBatch, 4u);
    EXPECT_EQ(back.layers, layout.layers);
    auto shortRow = out.row();
    shortRow.resize(shortRow.size() / 2);
    kiln::RowReader cut(shortRow);
    EXPECT_THROW(unpackLayout(cut), kiln::Error);
}

TEST(Layout, PinnedLayoutsThatCannotRunAreRefusedByName) {
    const auto set = threeNodeTemplates();
    const auto tooMany = errorOf([&] { pinnedInstantiation(set, "2+2", 3, 2, 8, "deck.ini:9"); });
    EXPECT_NE(tooMany.find("deck.ini:9: plan.pipelines = '2+2' cannot run here"), std::string::npos) << tooMany;
    EXPECT_NE(tooMany.find("the pipelines need 4 nodes, the job has 3"), std::string::npos) << tooMany;
    const auto tooFew = errorOf([&] { pinnedInstantiation(set, "2", 3, 2, 8, "deck.ini:9"); });
    EXPECT_NE(tooFew.find("1 pipeline cannot survive fault.f = 1 node failures: at least 2 are needed"), std::string::npos)
        << tooFew;
    const auto noTemplate = errorOf([&] { pinnedInstantiation(set, "3+1", 4, 2, 8, "deck.ini:9"); });
    EXPECT_NE(noTemplate.find("there is no 3-node template (this job has templates for 1, 2 nodes)"), std::string::npos)
        << noTemplate;
    const auto shares = errorOf([&] { pinnedInstantiation(set, "2:5+1:2", 3, 2, 8, "deck.ini:9"); });
    EXPECT_NE(shares.find("the microbatches add up to 7, but a global batch has 8"), std::string::npos) << shares;
    // Memory: a tight limit that the templates met with their reference microbatches,
    // but not with every microbatch on one pipeline in flight.
    // On 8 nodes, 4 one-layer stages fit with the 2 microbatches each of 2 such
    // pipelines (4000 + 2 x 1000 + 1000 bytes on stage 0), not with all 4 on one
    // (outputs of 0 bytes: no received activation adds to the later stages).
    ModelProfile p;
    p.model.blocks = 2;
    for (int i = 0; i < 4; ++i) p.layers.push_back({"block", 1e-3, 2e-3, 1000, 0, 1000});
    const auto tight = planTemplates(p, cluster(8, 7000, 1), 0, 4);
    ASSERT_EQ(tight.minNodes, 4u);
    const auto memory = errorOf([&] { pinnedInstantiation(tight, "4:4", 8, 1, 4, "deck.ini:9"); });
    EXPECT_NE(memory.find("does not fit in plan.memory_gb"), std::string::npos) << memory;
    EXPECT_NE(memory.find("microbatches in flight"), std::string::npos) << memory;
}

// Pass criterion: after a failure, the regrouped pipeline goes to the node that
// already holds its layers (nothing to move), where taking nodes in order
// would move layers.
TEST(Layout, RegroupKeepsLayersWhereTheyAre) {
    const auto set = threeNodeTemplates();
    const auto before = placeInstantiation(set, pinnedInstantiation(set, "2+1", 3, 2, 8, "deck.ini:9"), {0, 1, 2},
                                           {{0, 1}, {2, 3}, {4, 5}}, 4, 32);
    // Node 1 (ranks 2, 3) failed; nodes 0 and 2 survive and regroup into one 1-node pipeline.
    const std::vector<int> survivors{0, 2};
    const std::vector<std::vector<int>> ranks{{0, 1}, {2, 3}};  // their ranks after the shrink
    CurrentHoldings keep;
    keep.layerBytes.assign(6, 1000.0);
    for (int oldRanks : {0, 4}) {
        std::vector<Holding> held;
        for (int r = oldRanks; r < oldRanks + 2; ++r) held.push_back({before.roles[r].firstLayer, before.roles[r].endLayer});
        keep.ofNode.push_back(held);
    }
    const auto inst = pinnedInstantiation(set, "1", 2, 1, 8, "deck.ini:9");
    const auto inOrder = placeInstantiation(set, inst, survivors, ranks, 4, 32);
    const auto kept = placeInstantiation(set, inst, survivors, ranks, 4, 32, &keep);
    EXPECT_GT(bytesToMove(inOrder, ranks, keep), 0.0);
    EXPECT_EQ(bytesToMove(kept, ranks, keep), 0.0);
    EXPECT_EQ(kept.pipelines[0].nodeIds, std::vector<int>{2});
    EXPECT_EQ(kept.idleNodes, std::vector<int>{0});
}

// Pass criterion: with a spare, a regroup into the same pipelines puts the
// spare in the failed node's place and moves only that node's layers; the
// 1-node replica, which holds every layer, keeps its place (serving the
// light positions first would send it into the failed node's place and the
// whole model to the spare).
TEST(Layout, SpareTakesOnlyTheFailedNodesLayers) {
    ModelProfile p;
    p.model.blocks = 4;
    for (int i = 0; i < 6; ++i) p.layers.push_back({"block", 1e-3, 2e-3, 1000, 1000, 1000});
    const auto set = planTemplates(p, cluster(4, 1e12, 1), 1, 4);
    const auto inst = pinnedInstantiation(set, "3+1", 4, 2, 4, "deck.ini:9");
    // Start-up: nodes 0-3 hold 3+1, node 4 is the spare.
    const auto before = placeInstantiation(set, inst, {0, 1, 2, 3, 4}, {{0}, {1}, {2}, {3}, {4}}, 4, 16);
    ASSERT_EQ(before.idleNodes, std::vector<int>{4});
    // Node 1 fails; the survivors 0, 2, 3, 4 are ranks 0-3 after the shrink.
    CurrentHoldings keep;
    keep.layerBytes.assign(6, 1000.0);
    for (int old : {0, 2, 3, 4}) keep.ofNode.push_back({{before.roles[old].firstLayer, before.roles[old].endLayer}});
    const std::vector<std::vector<int>> ranks{{0}, {1}, {2}, {3}};
    const auto after = placeInstantiation(set, inst, {0, 2, 3, 4}, ranks, 4, 16, &keep);
    EXPECT_EQ(after.describe(), before.describe());
    const auto failedHeld = before.roles[1];
    EXPECT_EQ(bytesToMove(after, ranks, keep), 1000.0 * (failedHeld.endLayer - failedHeld.firstLayer));
    EXPECT_EQ(after.pipelines[0].nodeIds, (std::vector<int>{0, 4, 2}));
    EXPECT_EQ(after.pipelines[1].nodeIds, std::vector<int>{3});
}

// A pipeline the distribution gives no microbatch is explained, not left as a bare 0.
TEST(Instantiation, StandbyReplicaIsExplained) {
    const auto set = threeNodeTemplates();
    const auto inst = pinnedInstantiation(set, "2:8+1:0", 3, 2, 8, "deck.ini:9");
    const auto text = describeInstantiation(set, inst, 4);
    EXPECT_NE(text.find("pipeline 1 is a standby replica (0 microbatches)"), std::string::npos) << text;
    EXPECT_EQ(text.find("pipeline 0 is a standby"), std::string::npos) << text;
}
