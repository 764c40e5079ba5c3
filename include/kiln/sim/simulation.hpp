// A whole run replayed against a failure schedule with kiln's own decisions:
// the start-up instantiation of plan::planRun, the regroup rule of
// plan::regroup after every failure and admission, the layers a regroup keeps
// in place (plan::placeInstantiation) and the bytes it moves
// (plan::bytesToMove), the lost-layer test of the recovery
// (plan::holdersOfLayers), and a requeue from the last committed checkpoint
// beyond that. Time advances from event to event (failures, returns of
// repaired nodes, checkpoints), not step by step, so months of a large job
// take seconds.
#pragma once

#include "kiln/plan/run_plan.hpp"
#include "kiln/sim/costs.hpp"
#include "kiln/sim/failure_schedule.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::sim {

// What the run does after a failure.
enum class Policy {
    Kiln,               // recover in place whenever the survivors hold every layer; f restored after every failure
    FPerRun,            // the same, but at most f failed nodes per (re)start: the policy before redundancy was restored
    CheckpointRestart,  // every failure stops the job: requeue and restore the last checkpoint
};
std::string nameOf(Policy policy);

struct RunSetup {
    Policy policy = Policy::Kiln;
    double seconds = 0.0;                // wall time simulated
    std::uint64_t checkpointEvery = 0;   // steps; 0: none
    bool backgroundCheckpoints = true;   // the copy to host stalls the step, the write runs beside it
    double stopAtSteps = 0.0;            // > 0: the run ends once it has trained this many steps (seconds: a cap)
    double tokensPerStep = 0.0;
    double referenceTokensPerSecond = 0.0;  // the best failure-free layout of all the nodes (f = 0, no spares)
    std::vector<double> layerBytes;         // weights and moments of each layer (what migrating it costs)
    std::uint32_t ranksPerNode = 1;
};

// Seconds lost, by cause: the wall time is exactly useful tokens over the
// reference rate plus these.
struct LostTime {
    double detection = 0, recovery = 0, migration = 0, replay = 0;
    double redundancy = 0;  // the start-up layout (f + 1 pipelines, spares idle) against the reference
    double degraded = 0;    // layouts after failures slower than the start-up one
    double checkpoints = 0;  // steps stalled for checkpoints
    double admissions = 0;
    double queue = 0;        // waiting in the queue for nodes after a stop beyond f
    double requeues = 0;     // start-up, restore, and the checkpoint written on stopping, of requeued jobs
    double redone = 0;       // steps computed again after restoring a checkpoint
    double firstSteps = 0;   // each start's first step beyond the others (first_step_s)
    double total() const {
        return detection + recovery + migration + replay + redundancy + degraded + checkpoints + admissions + queue +
               requeues + redone + firstSteps;
    }
};

struct TimelinePoint {
    double time = 0.0;
    double tokensPerSecond = 0.0;  // 0 while the job is stopped or recovering
    std::uint32_t tolerance = 0;   // simultaneous node failures the running layout survives
    std::uint32_t liveNodes = 0;
};

struct SimResult {
    double seconds = 0.0, usefulTokens = 0.0, referenceTokensPerSecond = 0.0;
    double effective() const { return usefulTokens / (referenceTokensPerSecond * seconds); }
    LostTime lost;
    std::uint32_t failures = 0;  // failure events that hit the job's live nodes
    std::uint32_t survivedInPlace = 0, requeues = 0, admissions = 0, checkpoints = 0;
    std::uint32_t hostRequeues = 0;  // of the requeues, those of a host lost whole (FailureEvent::host)
    double bytesMigrated = 0.0;         // by every layout change
    double failureBytesMigrated = 0.0;  // by the regroups after failures alone
    double failedHoldingBytes = 0.0;    // what the failed nodes held (layers' weights and moments) when they failed
    std::uint32_t replans = 0;          // regroups that planned the whole layout again (fault.replan_margin)
    double belowFSeconds = 0.0;  // running with a tolerance below the plan's f
    std::uint32_t minTolerance = 0;
    std::vector<TimelinePoint> timeline;
    std::vector<double> failureTimes;
    double steps = 0.0;  // trained (and kept) by the end
    struct LayoutChange {
        double time;
        std::string layout;  // pipelines as nodes:microbatches ("2:5+1:3"), as diag.h5 records them
    };
    std::vector<LayoutChange> layouts;  // the start-up layout and each one the run switched to
};

// `plan`: planRun's for the deck and the nodes. Throws (the run's own
// exceptions) when a decision fails: a defect, found here first.
SimResult simulate(const plan::RunPlan& plan, const SimCosts& costs, const std::vector<FailureEvent>& failures,
                   const RunSetup& setup);

// Checkpoint-restart in closed form (Daly 2006, exponential failures that may
// also strike during checkpoints and restarts): the expected share of wall time
// that computes, for work between checkpoints `tau`, checkpoint `delta`,
// restart `restart` (started again by a failure during it), and mean time
// between failures of the job `mtbf`. `fixed`: a cost each failure adds that
// no failure interrupts (detection, the queue's wait: the job holds no nodes
// then), which Daly's form leaves out. All in seconds.
double dalyEfficiency(double tau, double delta, double restart, double mtbf, double fixed = 0.0);
// Young's interval, sqrt(2 delta M): the work between checkpoints that wastes least.
double youngInterval(double delta, double mtbf);

}  // namespace kiln::sim
