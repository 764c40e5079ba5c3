// fault.inject items: the straggler form (RANK:STEP[-END]:slow=LAG) and its
// errors, and the lag it adds to a microbatch.
#include "kiln/config/deck.hpp"
#include "kiln/fault/fault_injector.hpp"

#include <gtest/gtest.h>

using namespace kiln::fault;

TEST(FaultInjection, StragglerItemsParse) {
    std::vector<Injection> items;
    ASSERT_EQ(parseInjections("2:5:slow=0.05, 3:4-9:slow=2x 1:7:forward:slow 0:1:slow=.5s", items), "");
    ASSERT_EQ(items.size(), 4u);
    EXPECT_EQ(items[0].action, Injection::Action::Lag);
    EXPECT_EQ(items[0].rank, 2);
    EXPECT_EQ(items[0].step, 5u);
    EXPECT_EQ(items[0].endStep, ~0ull);
    EXPECT_DOUBLE_EQ(items[0].lagSeconds, 0.05);
    EXPECT_EQ(items[1].endStep, 9u);
    EXPECT_DOUBLE_EQ(items[1].lagFactor, 2.0);
    EXPECT_EQ(items[2].action, Injection::Action::Slow);  // the 10 s step, not a straggler
    EXPECT_DOUBLE_EQ(items[3].lagSeconds, 0.5);
}

// The deck checks fault.inject before the injector parses it: both must know every phase.
TEST(FaultInjection, TheDeckTakesEveryPhaseTheInjectorKnows) {
    for (int p = 0; p <= static_cast<int>(Phase::Ready); ++p) {
        const std::string item = std::string("1:2:") + phaseName(static_cast<Phase>(p));
        std::vector<Injection> items;
        EXPECT_EQ(parseInjections(item, items), "") << item;
        EXPECT_NO_THROW(kiln::config::Deck::fromText("", "t.ini", {"fault.inject=" + item})) << item;
    }
}

TEST(FaultInjection, BadStragglerItemsSayWhatIsExpected) {
    for (const char* bad : {"2:5:slow=", "2:5:slow=1x", "2:5:slow=0.5y", "2:9-5:slow=2x", "x:5:slow=2x", "2:5:slow=-1"}) {
        std::vector<Injection> items;
        const auto problem = parseInjections(bad, items);
        EXPECT_NE(problem.find(bad), std::string::npos) << bad << ": " << problem;
        EXPECT_TRUE(items.empty()) << bad;
    }
}

TEST(FaultInjection, LagFollowsTheStepsAndPhases) {
    std::vector<Injection> items;
    ASSERT_EQ(parseInjections("1:3-4:slow=3x 1:4:slow=0.25 0:0:slow=9", items), "");
    const FaultInjector injector(items, 1);
    EXPECT_DOUBLE_EQ(injector.lag(2, Phase::Forward, 1.0), 0.0);
    EXPECT_DOUBLE_EQ(injector.lag(3, Phase::Forward, 1.0), 2.0);   // twice its compute again
    EXPECT_DOUBLE_EQ(injector.lag(3, Phase::Backward, 0.5), 1.0);
    EXPECT_DOUBLE_EQ(injector.lag(4, Phase::Forward, 1.0), 2.25);  // both items
    EXPECT_DOUBLE_EQ(injector.lag(4, Phase::Backward, 1.0), 2.0);  // seconds go to forwards only
    EXPECT_DOUBLE_EQ(injector.lag(5, Phase::Forward, 1.0), 0.25);  // to the end of the run
    EXPECT_FALSE(injector.slows(2));
    EXPECT_TRUE(injector.slows(3));
    EXPECT_TRUE(injector.slows(5));
    EXPECT_FALSE(FaultInjector(items, 2).slows(3)) << "rank 2 is named by no item";
}

TEST(FaultInjection, NumericFaultsStrikeOnceOrAtEveryAttempt) {
    std::vector<Injection> items;
    ASSERT_EQ(parseInjections("1:5:nan, 1:6:corrupt 1:7:poison 2:5:nan 1:8:drift", items), "");
    ASSERT_EQ(items.size(), 5u);
    EXPECT_EQ(items[0].action, Injection::Action::NanLoss);
    EXPECT_EQ(items[1].action, Injection::Action::Corrupt);
    EXPECT_EQ(items[2].action, Injection::Action::Poison);
    EXPECT_EQ(items[4].action, Injection::Action::Drift);
    FaultInjector injector(items, 1);
    EXPECT_FALSE(injector.strikes(4, Injection::Action::NanLoss));
    EXPECT_TRUE(injector.strikes(5, Injection::Action::NanLoss));
    EXPECT_FALSE(injector.strikes(5, Injection::Action::NanLoss)) << "a transient fault: the rerun does not meet it";
    EXPECT_FALSE(injector.strikes(5, Injection::Action::Corrupt)) << "another kind";
    EXPECT_TRUE(injector.strikes(6, Injection::Action::Corrupt));
    EXPECT_FALSE(injector.strikes(6, Injection::Action::Corrupt));
    EXPECT_TRUE(injector.strikes(7, Injection::Action::Poison));
    EXPECT_TRUE(injector.strikes(7, Injection::Action::Poison)) << "the batch is bad at every attempt";
    EXPECT_TRUE(injector.strikes(8, Injection::Action::Drift));
    EXPECT_FALSE(injector.strikes(8, Injection::Action::Drift)) << "a rollback's replay of the step does not meet it";
    injector.at(5, Phase::Forward);  // a numeric item never kills
    // The deck accepts the same items.
    const auto deck = kiln::config::Deck::fromText("[fault]\ninject = 1:5:nan, 1:6:corrupt 1:7:poison 1:8:drift\n", "test.ini");
    EXPECT_EQ(deck.text("fault.inject"), "1:5:nan, 1:6:corrupt 1:7:poison 1:8:drift");
    EXPECT_THROW(kiln::config::Deck::fromText("[fault]\ninject = 1:5:nans\n", "test.ini"), std::exception);
}
