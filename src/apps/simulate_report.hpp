// What kiln simulate prints: one row per choice (and per baseline), the
// costs with their sources, the recommendation; as text, JSON and a plot.
#pragma once

#include "kiln/sim/simulation.hpp"
#include "silent_corruption_report.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::apps {

struct SimulatedChoice {
    std::string label;  // "f=1 spares=2 every=500", or a baseline's name
    sim::Policy policy = sim::Policy::Kiln;
    std::uint32_t f = 0, spares = 0;
    std::uint64_t checkpointEvery = 0;
    bool baseline = false;
    std::string startLayout;           // the start-up layout
    double closedForm = -1.0;          // checkpoint-restart's expected effective time (Daly), -1: none
    std::vector<sim::SimResult> seeds;  // one run per seed, the same failures for every choice
    double mean() const;
    double spread() const;  // the sample standard deviation over seeds (0 for one)
};

struct SimulateSummary {
    std::string deck;
    std::uint32_t nodes = 0, ranksPerNode = 0;
    double days = 0, nodeMtbfHours = 0;
    std::string failuresFrom;  // "drawn: ..." or the trace
    std::string reference;     // the reference layout and its throughput
    // What one node down does to the deck's own start-up layout until its repair (kiln plan --fail 1):
    // the step's change as recovery runs it and under a whole new plan; empty: not asked (a trace, spares).
    std::string nodeDown;
    double nodeDownKept = 0.0, nodeDownFull = 0.0;
    std::vector<std::pair<std::string, sim::Cost>> costs;
    std::vector<SimulatedChoice> choices;
    std::size_t recommended = 0;  // index into choices (never a baseline)
    double margin = 0.0;          // points of effective time ahead of the next choice
    std::string runnerUp;
    SilentCorruptionSummary silent;  // the checks priced against silent corruption (empty: not asked)
};

void printSimulateText(const SimulateSummary& s);
void printSimulateJson(const SimulateSummary& s);
// throughput.png (tokens/s and tolerance over the run, failures marked) of the first seed of each of `indices`.
void plotSimulation(const std::string& dir, const SimulateSummary& s, const std::vector<std::size_t>& indices, bool quiet);

}  // namespace kiln::apps
