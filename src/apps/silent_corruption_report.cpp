#include "silent_corruption_report.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace kiln::apps {
namespace {

std::string labelOf(const sim::SilentCorruptionPrice& p) {
    if (!p.check) return "no checks";
    if (p.compareEvery == 0) return "step check, no comparison";
    return fmt::format("step check, compare every {}", p.compareEvery);
}

bool isDecks(const SilentCorruptionSummary& s, const sim::SilentCorruptionPrice& p) {
    return p.check == s.deckCheck && p.compareEvery == (s.deckCheck ? s.deckCompareEvery : 0);
}

}  // namespace

std::size_t SilentCorruptionSummary::best() const {
    std::size_t best = 0;
    for (std::size_t i = 1; i < rows.size(); ++i)
        if (rows[i].total() < rows[best].total()) best = i;
    return best;
}

void printSilentCorruptionText(const SilentCorruptionSummary& s) {
    if (!s.priced()) return;
    const double hours = s.setup.seconds / 3600;
    fmt::print("\nsilent corruption: {:.2f} expected over the run ({}); {}\n", sim::expectedCorruptions(s.setup),
               s.rateFrom, s.layout);
    fmt::print("{:<36} {:>8} {:>11} {:>8} {:>8} {:>8} {:>8} {:>7} {:>13}\n", "hours lost (* the deck's setting)", "checks",
               "comparisons", "flagged", "compared", "missed", "total", "of run", "steps exposed");
    for (const auto& p : s.rows)
        fmt::print("{:<36} {:>8.2f} {:>11.2f} {:>8.2f} {:>8.2f} {:>8.2f} {:>8.2f} {:>6.2f}% {:>13.0f}\n",
                   (isDecks(s, p) ? "* " : "  ") + labelOf(p), p.checkSeconds / 3600, p.compareSeconds / 3600,
                   p.flaggedSeconds / 3600, p.comparedSeconds / 3600, p.missedSeconds / 3600, p.total() / 3600,
                   100 * p.total() / 3600 / hours, p.exposedSteps);
    const auto& best = s.rows[s.best()];
    fmt::print("least lost: {} ({:.2f} h); with no checks {:.2f} h, {} steps trained on corrupt numbers\n", labelOf(best),
               best.total() / 3600, s.rows.front().total() / 3600, std::llround(s.rows.front().exposedSteps));
}

nlohmann::json silentCorruptionJson(const SilentCorruptionSummary& s) {
    nlohmann::json out{{"events", sim::expectedCorruptions(s.setup)},
                       {"node_hours_between", s.setup.nodeHoursBetween},
                       {"rate_from", s.rateFrom},
                       {"layout", s.layout},
                       {"holders", s.setup.holders},
                       {"step_seconds", s.setup.stepSeconds},
                       {"best", labelOf(s.rows[s.best()])},
                       {"rows", nlohmann::json::array()}};
    for (const auto& p : s.rows)
        out["rows"].push_back({{"label", labelOf(p)},
                               {"check", p.check},
                               {"compare_every", p.compareEvery},
                               {"decks", isDecks(s, p)},
                               {"check_seconds", p.checkSeconds},
                               {"compare_seconds", p.compareSeconds},
                               {"flagged_seconds", p.flaggedSeconds},
                               {"compared_seconds", p.comparedSeconds},
                               {"missed_seconds", p.missedSeconds},
                               {"total_seconds", p.total()},
                               {"exposed_steps", p.exposedSteps}});
    return out;
}

}  // namespace kiln::apps
