// kiln simulate's engine: checkpoint-restart alone agrees with Daly's closed
// form; the wall time is exactly the useful work plus the time lost by cause;
// kiln's policy survives in place what the layout tolerates and requeues
// beyond it; f counted per run requeues at the (f+1)-th failure; a failure
// trace's errors name the file and line.
#include "kiln/base/error.hpp"
#include "kiln/plan/instantiation.hpp"
#include "kiln/plan/layout.hpp"
#include "kiln/plan/regroup.hpp"
#include "kiln/plan/templates.hpp"
#include "kiln/sim/failure_schedule.hpp"
#include "kiln/sim/simulation.hpp"
#include "../support/error_text.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>

using namespace kiln;
using kiln::test::errorOf;

namespace {

// `nodes` nodes of one rank (of which `spares` spares), a model of 6 equal layers, 8 microbatches a step.
plan::RunPlan smallPlan(std::uint32_t nodes, std::uint32_t f, std::uint32_t spares = 0) {
    plan::RunPlan r;
    r.profile.model.blocks = 4;
    for (int i = 0; i < 6; ++i) r.profile.layers.push_back({"block", 1e-3, 2e-3, 1000, 1000, 1000});
    r.cluster.nodes = nodes - spares;
    r.cluster.ranksPerNode = 1;
    r.cluster.stageWidth = 1;
    r.cluster.memoryPerRank = 1e12;
    r.spares = spares;
    r.f = f;
    r.microBatch = 1;
    r.globalMicrobatches = 8;
    r.templates = plan::planTemplates(r.profile, r.cluster, f, r.globalMicrobatches);
    r.instantiation = plan::instantiate(r.templates, r.cluster.nodes, f + 1, r.globalMicrobatches);
    return r;
}

sim::SimCosts costs() {
    sim::SimCosts c;
    c.detectEnded = {0.5, "s", "test"};
    c.detectHung = {5, "s", "test"};
    c.recovery = {1, "s", "test"};
    c.interBandwidth = {1e6, "B/s", "test"};
    c.admission = {2, "s", "test"};
    c.requeueWait = {30, "s", "test"};
    c.startup = {20, "s", "test"};
    c.readBandwidth = {1e6, "B/s", "test"};
    c.writeBandwidth = {1e6, "B/s", "test"};
    c.hostCopyBandwidth = {1e7, "B/s", "test"};
    c.stepScale = {1, "", "test"};
    c.repair = {600, "s", "test"};
    return c;
}

sim::RunSetup setupFor(const plan::RunPlan& p, sim::Policy policy, double seconds, std::uint64_t every) {
    sim::RunSetup s;
    s.policy = policy;
    s.seconds = seconds;
    s.checkpointEvery = every;
    s.tokensPerStep = 1000;
    s.referenceTokensPerSecond = s.tokensPerStep / p.instantiation.stepTime;
    s.layerBytes.assign(6, 1e5);  // 0.6 MB of state: 0.6 s to write or read at 1 MB/s
    return s;
}

sim::FailureEvent at(double time, std::vector<std::uint32_t> nodes) {
    sim::FailureEvent e;
    e.time = time;
    e.nodes = std::move(nodes);
    return e;
}

}  // namespace

TEST(Simulation, CheckpointRestartAgreesWithDalysClosedForm) {
    // One node, f = 0: every failure a requeue. Failures every 2000 s on average,
    // a blocking checkpoint of 0.6 s, a restart (start-up and restore) of 20.6 s,
    // no detection and no queue: Daly's model exactly.
    const auto p = smallPlan(1, 0);
    auto c = costs();
    c.detectEnded = {0, "s", "test"};
    c.requeueWait = {0, "s", "test"};
    c.repair = {0, "s", "test"};
    const double mtbf = 2000, delta = 0.6, restart = 20 + 0.6;
    const double step = p.instantiation.stepTime;
    for (const double tau : {sim::youngInterval(delta, mtbf), 20.0, 200.0}) {
        const auto every = static_cast<std::uint64_t>(std::llround(tau / step));
        auto setup = setupFor(p, sim::Policy::CheckpointRestart, 2e7, every);
        setup.backgroundCheckpoints = false;
        const sim::FailureModel model{1, setup.seconds, mtbf / 3600, 0, 1, 0, 0};
        const auto r = sim::simulate(p, c, sim::drawFailures(model, 7), setup);
        const double expected = sim::dalyEfficiency(double(every) * step, delta, restart, mtbf);
        EXPECT_NEAR(r.effective(), expected, 0.01) << "tau " << tau << " s, " << r.failures << " failures";
        EXPECT_GT(r.failures, 5000u);
        EXPECT_EQ(r.survivedInPlace, 0u);
    }
    // With a queue's wait that no failure interrupts (the job holds no nodes then): the extended form.
    c.requeueWait = {1000, "s", "test"};
    const auto every = static_cast<std::uint64_t>(std::llround(60 / step));
    auto setup = setupFor(p, sim::Policy::CheckpointRestart, 2e7, every);
    setup.backgroundCheckpoints = false;
    const auto r = sim::simulate(p, c, sim::drawFailures({1, setup.seconds, mtbf / 3600, 0, 1, 0}, 9), setup);
    EXPECT_NEAR(r.effective(), sim::dalyEfficiency(double(every) * step, delta, restart, mtbf, 1000), 0.01)
        << r.failures << " failures, " << r.requeues << " requeues, every " << every << ", " << r.lost.queue << " s queued";
    EXPECT_GT(std::abs(r.effective() - sim::dalyEfficiency(double(every) * step, delta, restart + 1000, mtbf)), 0.03);
    // Young's interval is the best of the three.
    EXPECT_GT(sim::dalyEfficiency(sim::youngInterval(delta, mtbf), delta, restart, mtbf),
              sim::dalyEfficiency(200, delta, restart, mtbf));
}

TEST(Simulation, WallTimeIsUsefulWorkPlusTimeLostByCause) {
    for (const auto policy : {sim::Policy::Kiln, sim::Policy::FPerRun, sim::Policy::CheckpointRestart})
        for (std::uint32_t spares : {0u, 1u}) {
            const auto p = smallPlan(6, 1, spares);
            auto setup = setupFor(p, policy, 2e6, 500);
            const sim::FailureModel model{6, setup.seconds, 20, 0.2, 2, 0.3, 0};
            const auto r = sim::simulate(p, costs(), sim::drawFailures(model, 3), setup);
            EXPECT_GT(r.failures, 50u);
            const double accounted = r.usefulTokens / r.referenceTokensPerSecond + r.lost.total();
            EXPECT_NEAR(accounted, r.seconds, 1e-6 * r.seconds) << sim::nameOf(policy) << ", " << spares << " spares";
            EXPECT_GT(r.effective(), 0.0);
            EXPECT_LT(r.effective(), 1.0);
        }
}

TEST(Simulation, KilnRecoversInPlaceWhatTheLayoutToleratesAndRequeuesBeyond) {
    // 6 nodes, f = 2: at least three pipelines (the planner's choice). Two
    // nodes at once are survived in place; then the survivors regroup.
    const auto p = smallPlan(6, 2);
    ASSERT_GE(p.instantiation.pipelines.size(), 3u);
    auto c = costs();
    c.repair = {0, "s", "test"};
    auto setup = setupFor(p, sim::Policy::Kiln, 1000, 0);
    auto r = sim::simulate(p, c, {at(100, {0, 2})}, setup);
    EXPECT_EQ(r.failures, 1u);
    EXPECT_EQ(r.survivedInPlace, 1u);
    EXPECT_EQ(r.requeues, 0u);
    EXPECT_EQ(r.layouts.size(), 2u);
    EXPECT_EQ(r.lost.redone, 0.0);
    // Every holder of some layer at once: beyond f, a requeue from the last checkpoint (none: all redone).
    std::vector<std::uint32_t> all{0, 1, 2, 3, 4, 5};
    r = sim::simulate(p, c, {at(100, all)}, setup);
    EXPECT_EQ(r.requeues, 1u);
    EXPECT_NEAR(r.lost.redone, 100.0, 1.0);
    // f counted per run: the third failed node stops the run although the layout would survive it.
    setup.policy = sim::Policy::FPerRun;
    r = sim::simulate(p, c, {at(100, {0}), at(200, {2}), at(300, {4})}, setup);
    EXPECT_EQ(r.survivedInPlace, 2u);
    EXPECT_EQ(r.requeues, 1u);
    setup.policy = sim::Policy::Kiln;
    r = sim::simulate(p, c, {at(100, {0}), at(200, {2}), at(300, {4})}, setup);
    EXPECT_EQ(r.survivedInPlace, 3u);
    EXPECT_EQ(r.requeues, 0u);
    // The last layout is what regroup() chooses for the 3 nodes left.
    const auto last = plan::regroup(p, 3);
    EXPECT_EQ(r.layouts.back().layout, plan::sharesOf(last.instantiation));
}

TEST(Simulation, AHostLostWholeIsRecoveredInPlaceUnlessItsVerdictComesAfterTheDeadline) {
    // A host whose processes and daemon ended (its connections reset) is recovered in place, as a node's
    // processes are: kiln's launch relay keeps the loss from Open MPI 5.0's runtime. A host gone silent is
    // recovered in place once the heartbeat detector has declared all its ranks failed everywhere (silent_host_s);
    // when the survivors' wait reaches its deadline first (the step's, plus two heartbeat timeouts), the launch
    // ends: a requeue, the steps since the last checkpoint redone.
    const auto p = smallPlan(6, 2);
    auto c = costs();
    c.repair = {0, "s", "test"};
    c.heartbeatTimeout = 2;
    const auto setup = setupFor(p, sim::Policy::Kiln, 1000, 0);
    auto lost = at(100, {0});
    lost.host = true;
    auto r = sim::simulate(p, c, {lost}, setup);
    EXPECT_EQ(r.survivedInPlace, 1u);
    EXPECT_EQ(r.hostRequeues, 0u);
    lost.hang = true;  // gone silent: every rank found within 6 s, before the deadline of 5 + 2 x 2 s
    c.silentHost = {6, "s", "test"};
    r = sim::simulate(p, c, {lost}, setup);
    EXPECT_EQ(r.survivedInPlace, 1u);
    EXPECT_EQ(r.hostRequeues, 0u);
    EXPECT_NEAR(r.lost.detection, 6.0, 1e-9);
    c.silentHost = {10, "s", "test"};  // found only after the deadline
    r = sim::simulate(p, c, {lost}, setup);
    EXPECT_EQ(r.survivedInPlace, 0u);
    EXPECT_EQ(r.requeues, 1u);
    EXPECT_EQ(r.hostRequeues, 1u);
    EXPECT_NEAR(r.lost.redone, 100.0, 1.0);  // no checkpoint: everything again
    EXPECT_NEAR(r.lost.detection, c.detectHung.value + 2 * c.heartbeatTimeout, 1e-9);
}

TEST(Simulation, ASpareTakesTheFailedNodesPlaceAndRepairedNodesComeBack) {
    const auto p = smallPlan(5, 1, 1);
    auto setup = setupFor(p, sim::Policy::Kiln, 2000, 0);
    const auto r = sim::simulate(p, costs(), {at(100, {0})}, setup);
    EXPECT_EQ(r.survivedInPlace, 1u);
    EXPECT_EQ(r.admissions, 1u);  // repaired after 600 s
    // The spare in its place: the start-up instantiation runs on, nothing degraded.
    EXPECT_NEAR(r.lost.degraded, 0.0, 1e-9);
    // Recorded again after the failure, as diag.h5 does: the same shares.
    ASSERT_EQ(r.layouts.size(), 2u);
    EXPECT_EQ(r.layouts[1].layout, r.layouts[0].layout);
}

// Pass criterion (issue 51): without a spare, a failure moves exactly the
// failed node's holdings (its neighbours take them: a patched pipeline), the
// repaired node takes them back (as much again), the other pipelines keep
// their nodes, and nothing is planned anew.
TEST(Simulation, AFailureMovesTheFailedNodesHoldingsAndItsRepairAsMuchAgain) {
    auto p = smallPlan(8, 1);
    p.instantiation = plan::pinnedInstantiation(p.templates, "2+2+2+2", 8, 2, 8, "test");
    auto setup = setupFor(p, sim::Policy::Kiln, 2000, 0);
    const auto r = sim::simulate(p, costs(), {at(100, {2}), at(1000, {7})}, setup);
    EXPECT_EQ(r.survivedInPlace, 2u);
    EXPECT_EQ(r.admissions, 2u);  // each repaired after 600 s
    EXPECT_EQ(r.replans, 0u);
    EXPECT_GT(r.failedHoldingBytes, 0.0);
    EXPECT_NEAR(r.failureBytesMigrated, r.failedHoldingBytes, 1e-6 * r.failedHoldingBytes);
    EXPECT_NEAR(r.bytesMigrated, 2.0 * r.failedHoldingBytes, 1e-6 * r.failedHoldingBytes);
    // After each failure 1+2+2+2 (a patched pipeline of one node), after each repair 2+2+2+2 again.
    ASSERT_EQ(r.layouts.size(), 5u);
    EXPECT_EQ(r.layouts.back().layout, r.layouts.front().layout);
}

TEST(Simulation, RunEndsAfterTheStepsAsked) {
    const auto p = smallPlan(4, 1);
    auto setup = setupFor(p, sim::Policy::Kiln, 1e6, 0);
    setup.stopAtSteps = 1000;
    const auto r = sim::simulate(p, costs(), {}, setup);
    EXPECT_DOUBLE_EQ(r.steps, 1000.0);
    EXPECT_NEAR(r.seconds, 1000 * p.instantiation.stepTime, 1e-9);
}

TEST(FailureTrace, ErrorsNameTheFileAndLine) {
    const std::string path = testing::TempDir() + "kiln-trace.txt";
    const auto write = [&](const std::string& text) { std::ofstream(path) << text; };
    write("# seconds nodes\n10 0\n\n20 1,2 hang\n5 3 host\n30 0 hang host\n");
    const auto events = sim::readFailureTrace(path, 4);
    ASSERT_EQ(events.size(), 4u);
    EXPECT_EQ(events[0].time, 5.0);
    EXPECT_TRUE(events[0].host);
    EXPECT_FALSE(events[0].hang);
    EXPECT_EQ(events[2].nodes, (std::vector<std::uint32_t>{1, 2}));
    EXPECT_TRUE(events[2].hang);
    EXPECT_FALSE(events[2].host);
    EXPECT_TRUE(events[3].hang && events[3].host);
    write("10 0 host host\n");
    EXPECT_NE(errorOf([&] { sim::readFailureTrace(path, 4); }).find(":1: \"host\""), std::string::npos);
    write("10 0\n20 4\n");
    EXPECT_NE(errorOf([&] { sim::readFailureTrace(path, 4); }).find(path + ":2"), std::string::npos);
    write("ten 0\n");
    EXPECT_NE(errorOf([&] { sim::readFailureTrace(path, 4); }).find("not a time"), std::string::npos);
    write("10 0 crash\n");
    EXPECT_NE(errorOf([&] { sim::readFailureTrace(path, 4); }).find(":1: \"crash\""), std::string::npos);
    std::remove(path.c_str());
}

TEST(FailureModel, RateAndGroups) {
    const sim::FailureModel model{100, 3600.0 * 1000, 100, 0.5, 10, 0, 0};
    const auto events = sim::drawFailures(model, 1);
    // 100 nodes failing every 100 h: a failure an hour.
    EXPECT_NEAR(double(events.size()), 1000.0, 100.0);
    std::size_t groups = 0;
    for (const auto& e : events) {
        if (e.nodes.size() == 10) {
            ++groups;
            EXPECT_EQ(e.nodes.front() % 10, 0u);
        } else {
            EXPECT_EQ(e.nodes.size(), 1u);
        }
    }
    EXPECT_NEAR(double(groups) / double(events.size()), 0.5, 0.06);
    EXPECT_EQ(sim::drawFailures(model, 1).size(), events.size());  // the same seed, the same schedule
    for (const auto& e : events) EXPECT_FALSE(e.host);
    auto hosts = model;
    hosts.hostShare = 0.2;
    std::size_t whole = 0;
    for (const auto& e : sim::drawFailures(hosts, 1)) whole += e.host ? 1 : 0;
    EXPECT_NEAR(double(whole) / double(events.size()), 0.2, 0.04);
}
