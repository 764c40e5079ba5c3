// What silent corruption costs a run, with kiln's numeric checks and replica
// comparisons (numerics.check, numerics.compare_every) and without them, in
// closed form: corruptions arrive at a rate per node-hour; a share of them
// shows in the step (a loss, gradient or activation out of bounds), the rest
// changes one copy of the model's state and shows only when the copies are
// compared. A corruption nobody flags is trained on until a person notices,
// and the run goes back to a checkpoint from before it.
#pragma once

#include <cstdint>
#include <vector>

namespace kiln::sim {

struct SilentCorruptionSetup {
    double seconds = 0.0;           // the run's wall time
    std::uint32_t nodes = 0;
    double nodeHoursBetween = 0.0;  // mean node-hours between silent corruptions
    double stepSeconds = 0.0;       // the running layout's step
    std::uint32_t holders = 1;      // copies of every layer (f + 1): 3 or more outvote a bad copy, 2 stop the job
    double checkpointSeconds = 0.0;  // wall time between checkpoints; 0: none (going back means the run's start)
    double inStepShare = 0.0;        // the share of corruptions that show in the step they strike
    double checkShare = 0.0;         // the step check's cost, a share of every step
    double compareSeconds = 0.0;     // one comparison of the copies (every rank reads its state once)
    double recoverySeconds = 0.0;    // a node retired in place
    double requeueSeconds = 0.0;     // a stop and a start again: the queue, the start-up, the restore
    double noticeSeconds = 0.0;      // until a person notices a run trained on corrupt numbers
    bool rollback = true;            // numerics.rollback: an outvoted copy's steps trained again from the last checkpoint
    double restoreSeconds = 0.0;     // every rank reading its layers of a checkpoint (a rollback's load)
};

// Expected seconds over the run, for one setting of the checks.
struct SilentCorruptionPrice {
    bool check = false;            // numerics.check
    std::uint64_t compareEvery = 0;  // numerics.compare_every; 0: never
    double events = 0.0;           // corruptions expected over the run
    double checkSeconds = 0.0, compareSeconds = 0.0;  // what the checks cost whether or not anything strikes
    double flaggedSeconds = 0.0;   // corruptions found in their step: the step again and a node retired
    double comparedSeconds = 0.0;  // found by a comparison: the steps trained on the bad copy, then retired or a requeue
    double missedSeconds = 0.0;    // found by nobody: trained on until noticed, then back to a checkpoint
    double exposedSteps = 0.0;     // steps trained while a corruption was in the state, expected over the run
    double lostSeconds() const { return flaggedSeconds + comparedSeconds + missedSeconds; }
    double total() const { return checkSeconds + compareSeconds + lostSeconds(); }
};

// Corruptions expected over the run (its nodes x hours over the node-hours between).
double expectedCorruptions(const SilentCorruptionSetup& s);

SilentCorruptionPrice priceSilentCorruption(const SilentCorruptionSetup& s, bool check, std::uint64_t compareEvery);

// The checks off, the step check alone, and the step check with a comparison every K steps for each of
// `compareEvery` (sorted, repeats dropped), in that order.
std::vector<SilentCorruptionPrice> silentCorruptionSweep(const SilentCorruptionSetup& s,
                                                         std::vector<std::uint64_t> compareEvery);

}  // namespace kiln::sim
