// The planner against exhaustive search on small instances: templates are
// optimal for the cost model, microbatch distribution and template selection
// are optimal, and every set of up to f failed nodes leaves survivors that
// regroup into pipelines from the same templates with every layer surviving.
#include "kiln/base/error.hpp"
#include "kiln/plan/instantiation.hpp"
#include "kiln/plan/plan_file.hpp"
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

ClusterSpec cluster(std::uint32_t nodes, double memory) {
    ClusterSpec c;
    c.nodes = nodes;
    c.ranksPerNode = 2;
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
        // Tight memory in some trials: some partitions are ruled out.
        const auto c = cluster(layers + 2, trial % 3 == 0 ? 3.5e7 : 1e12);
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
            ASSERT_TRUE(found) << "n=" << n;
            EXPECT_NEAR(t->pipelineTime(m), best.pipelineTime(m), 1e-12 * best.pipelineTime(m)) << "trial " << trial << " n=" << n;
            for (const auto& s : t->stages) EXPECT_LE(s.memory, c.memoryPerRank);
            ++compared;
        }
    }
    EXPECT_GT(compared, 150);
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
            std::vector<int> owner;  // node -> pipeline (idle: -1)
            for (std::size_t p = 0; p < inst.pipelines.size(); ++p) owner.insert(owner.end(), inst.pipelines[p].nodes, int(p));
            owner.resize(nodes, -1);
            for (std::uint32_t mask = 1; mask < (1u << nodes); ++mask) {
                const auto k = static_cast<std::uint32_t>(__builtin_popcount(mask));
                if (k > f) continue;
                std::vector<bool> hit(inst.pipelines.size(), false);
                for (std::uint32_t node = 0; node < nodes; ++node)
                    if ((mask >> node & 1) && owner[node] >= 0) hit[owner[node]] = true;
                EXPECT_TRUE(std::find(hit.begin(), hit.end(), false) != hit.end())
                    << "every pipeline lost a node: " << nodes << " nodes, f=" << f << ", failed mask " << mask;
                const auto after = instantiate(set, nodes - k, f + 1 - k, 8);
                EXPECT_GE(after.pipelines.size(), f + 1 - k);
            }
        }
    }
}

TEST(PlannerErrors, SayWhatWouldFit) {
    std::mt19937 rng(2);
    const auto profile = randomProfile(rng, 6);
    const std::string tooBig = errorOf([&] { planTemplates(profile, cluster(4, 1e6), 0, 4); });
    EXPECT_NE(tooBig.find("the model does not fit on 4 nodes"), std::string::npos) << tooBig;
    EXPECT_NE(tooBig.find("GB per rank"), std::string::npos) << tooBig;
    const std::string tooManyFailures = errorOf([&] { planTemplates(profile, cluster(4, 1e12), 4, 4); });
    EXPECT_NE(tooManyFailures.find("fault.f = 4 needs f+1 = 5 pipelines"), std::string::npos) << tooManyFailures;
    EXPECT_NE(tooManyFailures.find("fault.f can be at most 3"), std::string::npos) << tooManyFailures;
    kiln::model::ModelConfig other;
    other.blocks = 9;
    other.dModel = 64;
    const std::string mismatch = errorOf([&] { requireSameModel(profile, other, "p.h5"); });
    EXPECT_NE(mismatch.find("p.h5 profiles another model"), std::string::npos) << mismatch;
    EXPECT_NE(mismatch.find("model.blocks is 4 in the profile but 9 in the deck"), std::string::npos) << mismatch;
}

TEST(PlanFile, RoundTrips) {
    std::mt19937 rng(3);
    const auto profile = randomProfile(rng, 7);
    const auto set = planTemplates(profile, cluster(6, 1e12), 1, 10);
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
    }
    ASSERT_EQ(backInst.pipelines.size(), inst.pipelines.size());
    EXPECT_EQ(backInst.pipelines[0].microbatches, inst.pipelines[0].microbatches);
    EXPECT_DOUBLE_EQ(backInst.stepTime, inst.stepTime);
    EXPECT_EQ(backInst.nodesIdle, inst.nodesIdle);
    std::remove(path.c_str());
}
