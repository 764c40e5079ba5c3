// The admission a rank watches (issue 52), with fake joiners: what the step's collective carries of it as the
// new processes start, become ready or fail, and how it is let go. No MPI, no processes started.
#include "../../src/train/admission_watch.hpp"

#include <gtest/gtest.h>

using kiln::comm::JoinersStarting;
using kiln::train::AdmissionWatch;

namespace {

struct FakeJoiners final : AdmissionWatch::Joiners {
    JoinersStarting::Phase* now;
    explicit FakeJoiners(JoinersStarting::Phase* phase) : now(phase) {}
    JoinersStarting::Phase phase() override { return *now; }
    std::string problem() const override { return "new process 1 ended while it started"; }
    double readySeconds() const override { return 1.5; }
    JoinersStarting* spawned() override { return nullptr; }
};

}  // namespace

TEST(AdmissionWatch, NothingWhenNoneWaits) {
    AdmissionWatch watch;
    EXPECT_FALSE(watch.waiting());
    EXPECT_EQ(watch.stepField(), 0.0);
    EXPECT_FALSE(watch.ready());
    EXPECT_EQ(watch.giveUpFailed(), "");
    EXPECT_EQ(watch.readySeconds(), 0.0);
}

TEST(AdmissionWatch, TheStepCarriesTheNodesOnceReady) {
    auto phase = JoinersStarting::Phase::Starting;
    AdmissionWatch watch;
    watch.started(std::make_unique<FakeJoiners>(&phase), 2);
    EXPECT_TRUE(watch.waiting());
    EXPECT_EQ(watch.stepField(), 0.0);  // still starting: the job does not wait for them
    EXPECT_FALSE(watch.ready());
    EXPECT_EQ(watch.giveUpFailed(), "");  // not failed: kept
    EXPECT_TRUE(watch.waiting());
    phase = JoinersStarting::Phase::Ready;
    EXPECT_EQ(watch.stepField(), 2.0);
    EXPECT_TRUE(watch.ready());
    EXPECT_EQ(watch.nodes(), 2);
    EXPECT_EQ(watch.readySeconds(), 1.5);
    watch.clear();  // taken in
    EXPECT_FALSE(watch.waiting());
    EXPECT_EQ(watch.stepField(), 0.0);
    EXPECT_EQ(watch.nodes(), 0);
}

TEST(AdmissionWatch, FailedJoinersAreSaidThenLetGo) {
    auto phase = JoinersStarting::Phase::Starting;
    AdmissionWatch watch;
    watch.started(std::make_unique<FakeJoiners>(&phase), 3);
    phase = JoinersStarting::Phase::Failed;
    EXPECT_EQ(watch.stepField(), -3.0);  // every rank learns the admission was given up
    EXPECT_FALSE(watch.ready());
    EXPECT_EQ(watch.giveUpFailed(), "new process 1 ended while it started");
    EXPECT_FALSE(watch.waiting());
    EXPECT_EQ(watch.stepField(), 0.0);  // said once
}
