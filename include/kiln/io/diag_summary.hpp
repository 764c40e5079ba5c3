// What `kiln diag` shows of a run, computed from its diag.h5's records: the
// records as one run saw them (a resumed run's re-recorded steps count once),
// the totals of its step times, and each layout's measured step time.
// Kept apart from the printing so the arithmetic has tests of its own.
#pragma once

#include "kiln/io/diag_file.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::io {

// Seconds summed over the summarized steps (rank 0's view of each step).
struct StepTotals {
    double time = 0, dataWait = 0, tokens = 0, forward = 0, backward = 0, sync = 0, optimizer = 0, pipelineWait = 0;
    // Time in none of the measured phases.
    double other() const { return time - dataWait - forward - backward - pipelineWait - sync - optimizer; }
};

struct DiagRecords {
    std::vector<StepRecord> steps;
    std::vector<std::string> sources;
    std::vector<std::vector<std::uint64_t>> sourceTokens;  // a row per row of `steps`
    std::vector<EventRecord> events;
    std::vector<InstantiationRecord> layouts;
    std::vector<FailureRecord> failures;
    std::vector<EvalRecord> evals;
    RouterShape routerShape;
    std::vector<RouterRow> router;  // a row per row of `steps` (none for a dense model)
};

struct DiagSummary {
    std::vector<StepRecord> steps;                   // one per step, the last recorded, in step order
    std::vector<std::vector<std::uint64_t>> mix;     // tokens per source of each of `steps`
    std::vector<std::string> sources;
    std::vector<std::uint64_t> tokensPerSource;      // over all of `steps`
    StepTotals totals;
    std::vector<InstantiationRecord> layouts;
    std::vector<double> measuredStepTime;  // per layout: the median step time of the steps it ran, 0 if none
    std::vector<FailureRecord> failures;
    std::vector<EvalRecord> evals;  // one per step count, the last recorded
    std::vector<EventRecord> events;
    RouterShape routerShape;
    std::vector<RouterRow> router;  // one per row of `steps` (none for a dense model)
};

DiagRecords readDiagRecords(const std::string& path);

// Each expert's tokens in `row` against a fair share of its block's (1: fair), blocks x experts.
std::vector<double> expertShares(const RouterRow& row, RouterShape shape);
DiagSummary summarize(DiagRecords records);

// The median of `values` (the upper one of an even count; 0 for none).
double medianOf(std::vector<double> values);

}  // namespace kiln::io
