// Fault injection for tests and demos: the deck's fault.inject lists
// "RANK:STEP:PHASE[:stop|:slow|:throw|:hang]" items; the process whose
// start-up rank is RANK kills itself with SIGKILL (a real fail-stop, as a
// dying node looks to MPI) when it reaches PHASE of STEP, or with ":stop"
// stops itself (SIGSTOP: a hung process, which only the heartbeat detector
// finds), or with ":slow" computes for 10 s without calling MPI (a long step,
// which must not pass for a hang), or with ":throw" throws an exception that
// is not kiln's (as libtorch or the C++ library would: a local error), or
// with ":hang" sleeps forever outside MPI while its other threads live (a
// hung file read or device call: only fault.step_timeout_s finds it).
// "RANK:STEP[-END]:slow=LAG" makes a straggler instead: from STEP on (to END,
// included) that rank is slower on every microbatch, by LAG seconds of sleep
// after each forward ("slow=0.05", "slow=0.05s") or by a factor of its own
// compute time ("slow=2x": each forward and backward sleeps as long again as
// it computed), as a throttled device or a noisy neighbour would be.
// Numeric faults (issue 66), each at step STEP of rank RANK, the process living on: "RANK:STEP:nan" a NaN in
// the loss of its first microbatch (a last stage's), once, as a transient compute fault would give;
// "RANK:STEP:corrupt" the first activation or gradient it sends in the step with its exponent's top bit
// flipped, once (a silent compute or transfer fault); "RANK:STEP:poison" a NaN in that loss at every attempt
// of the step (a batch that is bad whoever computes it: the data); "RANK:STEP:flip" the exponent's top bit of a
// parameter's value flipped as the step starts (memory: it stays until repaired).
#pragma once

#include <cstdint>
#include <string>
#include <mutex>
#include <vector>

namespace kiln::fault {

// Forward: before the first forward of a step; Backward: before its first
// backward; Send: before the step's first activation or gradient is sent to a
// neighbouring stage; AllReduce: before the loss and gradient sums; Sums: in
// the middle of the gradient sums (after this rank's first bucket); Commit:
// before the step's agreement; Optimizer: after the commit, before the update;
// Checkpoint: before a checkpoint write; Write: in a writer of a checkpoint's
// part file, after its first layer (in the background thread of a periodic
// one; STEP is the step the checkpoint follows); Publish: on the writing rank, once a
// checkpoint file is complete, before it is renamed and `latest` moved; Regroup: in a recovery, after the
// shrink; Migrate: in a recovery, before the layer transfers; Eval: in a held-out evaluation after
// STEP, before its first batch's forwards. The phases of a recovery (issue 50), in order: Agree:
// at the start of each round, before the failed set is agreed; Regroup; Migrate; Received: once this
// rank received its first migrated atom (the layer's parameters and moments only partly arrived
// elsewhere); Migrated: every transfer done, before the agreement that commits the new layout;
// Rebuild: the layout committed, before its communicators and stages are built. A layout change
// of an admission or a straggler's retirement passes through the same four migration phases.
// Ready: on a process started to join a running job, before it says it is ready (RANK: the start-up
// rank it is to have, STEP 0). Ready stays last: tests walk every phase up to it.
enum class Phase {
    Forward, Backward, Send, AllReduce, Sums, Commit, Optimizer, Checkpoint, Write, Publish,
    Regroup, Migrate, Agree, Received, Migrated, Rebuild, Eval, Ready, Rollback
};

const char* phaseName(Phase phase);

struct Injection {
    int rank = 0;
    std::uint64_t step = 0;
    Phase phase = Phase::Forward;
    enum class Action { Kill, Stop, Slow, Throw, Hang, Lag, NanLoss, Corrupt, Poison, Flip, Drift } action = Action::Kill;
    // Lag only: steps [step, endStep], and seconds per microbatch or a factor (> 1) of compute.
    std::uint64_t endStep = 0;
    double lagSeconds = 0.0, lagFactor = 0.0;
};

// How long a ":slow" injection computes without MPI.
constexpr double kSlowInjectionSeconds = 10.0;

// Parses "3:5:allreduce, 7:9:forward"; on a bad item returns the text that says
// what is expected (for the deck's check), else fills `out`.
std::string parseInjections(const std::string& text, std::vector<Injection>& out);

class FaultInjector {
public:
    FaultInjector(std::vector<Injection> injections, int originalRank);
    // Kills this process if an injection names it at (step, phase). A ':slow'
    // injection fires once, not again when a recovery replays the step.
    void at(std::uint64_t step, Phase phase);
    // Seconds this rank's ':slow=' items add to one microbatch's forward or
    // backward (`phase`) at `step`, which computed for `computed` seconds.
    double lag(std::uint64_t step, Phase phase, double computed) const;
    // Whether a ':slow=' item applies at `step`: only then does the lag need
    // what was computed (on a GPU, reading it waits for the device).
    bool slows(std::uint64_t step) const;
    // Sleeps that long (nothing when no item applies).
    void straggle(std::uint64_t step, Phase phase, double computed) const;
    // Whether a numeric fault of `kind` (NanLoss, Corrupt, Poison, Flip, Drift) strikes now, at `step`: all but Poison
    // once (a rerun of the step does not meet them again), Poison at every attempt of the step.
    bool strikes(std::uint64_t step, Injection::Action kind);

private:
    std::vector<Injection> mine_;
    std::vector<bool> fired_;  // guarded by firedMutex_
    std::mutex firedMutex_;
};

}  // namespace kiln::fault
