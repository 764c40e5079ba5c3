// Deck parsing: good decks resolve, and every malformed line gets an error
// naming the file, line, key and what is allowed (one case per mistake).
#include "kiln/config/deck.hpp"
#include "kiln/config/deck_schema.hpp"

#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <sstream>

using kiln::config::Deck;
using kiln::config::DeckError;

namespace {

// The text of the DeckError that `text` raises, or "" if it parses.
std::string deckError(const std::string& text, const std::vector<std::string>& overrides = {}) {
    try {
        Deck::fromText(text, "t.ini", overrides);
    } catch (const DeckError& e) {
        return e.what();
    }
    return "";
}

void expectError(const std::string& text, const std::string& pattern) {
    const std::string error = deckError(text);
    EXPECT_TRUE(std::regex_search(error, std::regex(pattern))) << "deck:\n" << text << "\nerror:\n" << error;
}

}  // namespace

TEST(Deck, DefaultsWhenEmpty) {
    const auto deck = Deck::fromText("", "t.ini");
    EXPECT_EQ(deck.integer("fault.f"), 0);
    EXPECT_EQ(deck.integer("data.seq_len"), 256);
    EXPECT_EQ(deck.setting("fault.f").origin, "default");
}

TEST(Deck, ReadsSectionsTypesAndLines) {
    const auto deck = Deck::fromText(
        "# comment\n[run]\nname = tiny  # trailing comment\nsteps = 7\n\n[fault]\nf = 2\n[data]\nmix = wiki:0.7, books:0.3\n",
        "t.ini");
    EXPECT_EQ(deck.text("run.name"), "tiny");
    EXPECT_EQ(deck.integer("run.steps"), 7);
    EXPECT_EQ(deck.integer("fault.f"), 2);
    EXPECT_EQ(deck.setting("fault.f").origin, "t.ini:7");
    ASSERT_EQ(deck.mix("data.mix").size(), 2u);
    EXPECT_EQ(deck.mix("data.mix")[1].source, "books");
    EXPECT_DOUBLE_EQ(deck.mix("data.mix")[0].weight, 0.7);
}

TEST(Deck, OverridesWinAndSayWhereFrom) {
    const auto deck = Deck::fromText("[fault]\nf = 2\n", "t.ini", {"fault.f=1", "data.seq_len=64"});
    EXPECT_EQ(deck.integer("fault.f"), 1);
    EXPECT_EQ(deck.integer("data.seq_len"), 64);
    EXPECT_EQ(deck.setting("fault.f").origin, "--set");
}

TEST(Deck, ResolvedTextRoundTrips) {
    const auto deck = Deck::fromText("[fault]\nf = 3\n[data]\nmix = a:1 b:2\n", "t.ini");
    const auto again = Deck::fromText(deck.resolvedText(), "resolved.ini");
    for (const auto& key : kiln::config::deckSchema())
        EXPECT_EQ(kiln::config::formatValue(again.setting(key.name).value),
                  kiln::config::formatValue(deck.setting(key.name).value))
            << key.name;
}

// Each section once: INI readers (Python's configparser among them) refuse a section that comes back.
TEST(Deck, ResolvedTextNamesEachSectionOnce) {
    const std::string text = Deck::fromText("", "t.ini").resolvedText();
    std::istringstream lines(text);
    std::set<std::string> seen;
    for (std::string line; std::getline(lines, line);)
        if (!line.empty() && line.front() == '[') EXPECT_TRUE(seen.insert(line).second) << line << " comes twice";
    EXPECT_GE(seen.size(), 8u);
}

TEST(DeckErrors, NotAnInteger) { expectError("[fault]\nf = two\n", R"(t\.ini:2: fault\.f = 'two': expected an integer)"); }
// The exit watchdog after failures must leave a process time to close its files.
TEST(DeckErrors, FinalizeTimeoutTooShort) {
    expectError("[fault]\nfinalize_timeout_s = 1\n", R"(t\.ini:2: fault\.finalize_timeout_s = '1': must be a real number in \[5, 3600\])");
}
TEST(DeckErrors, NegativeF) { expectError("[fault]\nf = -1\n", R"(t\.ini:2: fault\.f = '-1': must be an integer >= 0)"); }
TEST(DeckErrors, UnknownKeySuggestsNearest) {
    expectError("[data]\nseq_lne = 5\n", R"(t\.ini:2: unknown key 'data\.seq_lne'; did you mean 'data\.seq_len'\?)");
}
TEST(DeckErrors, KeyInWrongSectionSuggestsRightOne) {
    expectError("[data]\nf = 1\n", R"(t\.ini:2: unknown key 'data\.f'; did you mean 'fault\.f'\?)");
}
TEST(DeckErrors, NoSuggestionForNonsense) {
    const auto error = deckError("[zzz]\nqqqqqqqqqqqq = 1\n");
    EXPECT_NE(error.find("unknown key 'zzz.qqqqqqqqqqqq'"), std::string::npos) << error;
    EXPECT_EQ(error.find("did you mean"), std::string::npos) << error;
}
TEST(DeckErrors, LineWithoutEquals) {
    expectError("[run]\nsteps 10\n", R"(t\.ini:2: 'steps 10' is neither \[section\] nor key = value)");
}
TEST(DeckErrors, BrokenSectionHeader) { expectError("[run\nsteps = 1\n", R"(t\.ini:1: '\[run' is not a section header)"); }
TEST(DeckErrors, RepeatedKey) {
    expectError("[fault]\nf = 1\nf = 2\n", R"(t\.ini:3: key 'fault\.f' is set again \(first set on line 2\))");
}
TEST(DeckErrors, NegativeWeight) {
    expectError("[data]\nmix = a:1 b:-2\n", R"(t\.ini:2: data\.mix = 'a:1 b:-2': weight of source 'b' is -2; weights must be >= 0)");
}
TEST(DeckErrors, AllZeroWeights) { expectError("[data]\nmix = a:0 b:0\n", R"(t\.ini:2: data\.mix = .*weights are all zero)"); }
TEST(DeckErrors, MixWithoutWeight) { expectError("[data]\nmix = wiki\n", R"(t\.ini:2: data\.mix = 'wiki': 'wiki' is not SOURCE:WEIGHT)"); }
TEST(DeckErrors, MixSourceTwice) { expectError("[data]\nmix = a:1 a:2\n", R"(source 'a' is listed twice)"); }
TEST(DeckErrors, BadOverride) {
    const auto error = deckError("", {"fault.f"});
    EXPECT_NE(error.find("--set fault.f: expected --set section.key=value"), std::string::npos) << error;
    const auto error2 = deckError("", {"fault.ff=1"});
    EXPECT_NE(error2.find("--set: unknown key 'fault.ff'; did you mean 'fault.f'?"), std::string::npos) << error2;
}
TEST(DeckErrors, AllProblemsReportedAtOnce) {
    const auto error = deckError("[fault]\nf = x\n[data]\nseq_len = 0\nmixx = a:1\n");
    EXPECT_NE(error.find("has 3 problems"), std::string::npos) << error;
    EXPECT_NE(error.find("t.ini:2"), std::string::npos);
    EXPECT_NE(error.find("t.ini:4"), std::string::npos);
    EXPECT_NE(error.find("t.ini:5"), std::string::npos);
}
TEST(DeckErrors, MissingFileNamesIt) {
    try {
        Deck::fromFile("/no/such/deck.ini");
        FAIL() << "no error";
    } catch (const kiln::InputError& e) {
        EXPECT_NE(std::string(e.what()).find("cannot open deck '/no/such/deck.ini'"), std::string::npos);
    }
}

TEST(DeckSchema, EveryDefaultPassesItsOwnCheck) {
    for (const auto& key : kiln::config::deckSchema()) {
        auto parsed = kiln::config::parseValue(key.type, key.defaultValue);
        ASSERT_TRUE(std::holds_alternative<kiln::config::Value>(parsed)) << key.name;
        if (key.check) {
            EXPECT_EQ(key.check(std::get<kiln::config::Value>(parsed)), "") << key.name;
        }
        EXPECT_FALSE(key.help.empty()) << key.name;
    }
}

TEST(DeckSchema, EditDistance) {
    EXPECT_EQ(kiln::config::editDistance("kitten", "sitting"), 3u);
    EXPECT_EQ(kiln::config::editDistance("", "abc"), 3u);
    EXPECT_EQ(kiln::config::editDistance("same", "same"), 0u);
}

TEST(DeckErrors, BadFaultInjection) {
    expectError("[fault]\ninject = 3:5:lunch\n", R"(t\.ini:2: fault\.inject = '3:5:lunch': '3:5:lunch' is not RANK:STEP:PHASE)");
    expectError("[fault]\ninject = 3:5\n", R"(t\.ini:2: fault\.inject = '3:5': '3:5' is not RANK:STEP:PHASE)");
    EXPECT_EQ(deckError("[fault]\ninject = 3:5:allreduce, 1:9:forward\n"), "");
}
