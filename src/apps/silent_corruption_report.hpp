// The silent-corruption part of kiln simulate's report: what the numeric
// checks and the replicas' comparisons cost against what the corruptions they
// find would cost unfound, for the deck's own layout.
#pragma once

#include "kiln/sim/silent_corruption.hpp"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::apps {

struct SilentCorruptionSummary {
    std::string rateFrom;  // where the rate came from
    std::string layout;    // the deck's layout as priced: copies, step, checkpoints
    sim::SilentCorruptionSetup setup;
    std::vector<sim::SilentCorruptionPrice> rows;  // silentCorruptionSweep's
    bool deckCheck = true;                         // the deck's numerics.check and compare_every
    std::uint64_t deckCompareEvery = 0;
    bool priced() const { return !rows.empty(); }
    std::size_t best() const;  // the row that loses least
};

void printSilentCorruptionText(const SilentCorruptionSummary& s);
nlohmann::json silentCorruptionJson(const SilentCorruptionSummary& s);

}  // namespace kiln::apps
