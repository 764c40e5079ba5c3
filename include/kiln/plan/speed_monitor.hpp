// Measured speeds against the plan, during the run: which pipeline computes
// slower (or faster) than the share of the batch it was given assumes, and
// which node is so much slower than its peers that the job is better off
// without it.
//
// Every committed step, each rank's compute time (its forwards and
// backwards, not its waits) over its microbatches, divided by the planner's
// time for its stage, is its ratio r: how much slower than planned it runs.
// The planner's times are off by a constant for every rank (a synthetic
// profile, overheads it leaves out), so times are scaled by the median
// rank's ratio R (of an even count, the faster middle one: of two ranks, one
// slow, the other is the reference). A rank's slowdown x is then its scaled
// time against its pipeline's planned bottleneck stage, not against its own
// stage: 1F1B runs at its slowest stage, so a rank slows its pipeline only
// when it takes longer than that bottleneck. (Against its own stage, a stage
// planned at almost nothing, an embedding alone, measured hundreds of times
// "slow" from fixed per-microbatch costs alone, and a healthy node was
// retired.) Each rank's x is taken over a window of steps (its median, or
// its fastest step where a rebalance is decided; one long step is not a
// straggler); a pipeline's slowdown is then its slowest rank's, a node's its
// slowest rank's.
// Decisions are a pure function of the gathered times, so every rank that
// gathered the same ones takes the same decision:
// nothing else need be agreed.
//
// Rebalance: a pipeline whose slowdown in each of the last straggler.steps
// steps is beyond straggler.rebalance_at of what its share assumes (slower,
// or faster by the same factor: a node that recovered). Noise only adds
// time, so one long step, however long, among otherwise fast ones changes
// nothing. The batch is split again by the measured (median) slowdowns,
// with the planner's exact integer
// distribution, when that split predicts a step at least kRebalanceMinGain
// shorter than the current one (smaller gains are noise on shared nodes).
// Retire: a node slower than straggler.retire_at over straggler.retire_steps
// steps, when the nodes left can still form the pipelines fault.f asks for
// and the plan predicts a shorter step without it.
// Return: a retired straggler's ranks stay in the job without work (benched)
// and time one block every step (train/straggler_probe.hpp), as do the ranks
// of a healthy reference node; a node whose every rank probed no slower than
// straggler.return_at times the reference over straggler.retire_steps steps
// comes back.
#pragma once

#include "kiln/plan/layout.hpp"
#include "kiln/plan/run_plan.hpp"

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace kiln::config {
class Deck;
}

namespace kiln::plan {

// The least predicted gain (a fraction of the step) a new split of the batch must bring.
inline constexpr double kRebalanceMinGain = 0.05;

struct StragglerPolicy {
    double rebalanceAt = 1.25;  // 0: never rebalance
    std::uint32_t steps = 5;
    double retireAt = 3.0;  // 0: never retire
    std::uint32_t retireSteps = 10;
    double returnAt = 1.5;  // 0: a retired straggler never comes back
};

// The deck's straggler.* keys.
StragglerPolicy stragglerPolicyFromDeck(const config::Deck& deck);

struct SpeedVerdict {
    enum class Action { None, Rebalance, Retire } action = Action::None;
    // Rebalance: the new split (instantiation of the current pipelines, their
    // microbatches and predicted step times with the measured slowdowns).
    Instantiation instantiation;
    std::vector<double> slowdown;  // per pipeline, what the new split assumes
    int node = -1;                 // Retire: the start-up id of the node
    double nodeSlowdown = 0.0;
    std::string detail;  // in words, for the log and diag.h5
    // Action None: a slow node kept (and why), said once per layout; else empty.
    std::string note;
};

// What the monitor measured over its window, per pipeline and node.
struct MeasuredSpeeds {
    double ratio = 0.0;  // R: the reference rank's measured / planned compute time
    std::vector<double> pipelineSlowdown;  // 0 for a pipeline with no microbatches
    std::vector<std::pair<int, double>> nodeSlowdown;  // start-up node id, slowdown
};

class SpeedMonitor {
public:
    explicit SpeedMonitor(StragglerPolicy policy) : policy_(policy) {}
    const StragglerPolicy& policy() const { return policy_; }

    // A new layout: history forgotten; `assumed`: the slowdown per pipeline
    // its split was made for (empty: the plan's, all 1). The step that
    // follows is not counted (first-step allocations, a replay).
    void reset(const std::vector<double>& assumed = {});

    // After a committed step of `layout` (its ranks those of the gathered
    // times): `compute[r]`, rank r's seconds computing. `plan` is the start-up
    // plan (the templates; regroups from it), `liveNodes` the nodes alive,
    // spares included, and `tolerance` what the current layout survives.
    SpeedVerdict observe(const Layout& layout, const RunPlan& plan, const std::vector<double>& compute,
                         std::uint32_t liveNodes, std::uint32_t tolerance);

    // The medians over the window so far (empty before any step was counted).
    MeasuredSpeeds measured(const Layout& layout) const;

    // For the benched ranks of retired stragglers, after each committed
    // step: `probe[r]` the seconds rank r's probe computed (0: none),
    // `nodeOfRank[r]` its start-up node. The ranks of `referenceNode` (a
    // healthy node) run the same probe in the same step, so a benched node's
    // slowdown is its slowest rank's probe against their median: no plan,
    // no profile error, the same device and contention. Returns the start-up
    // id of a node whose every rank (`ranksPerNode`) probed and whose median
    // slowdown over the last straggler.retire_steps steps is at most
    // straggler.return_at (and that median), and forgets its probes; node
    // -1 when none. Probes are forgotten on reset() too, so that processes
    // admitted since decide alike.
    struct Recovered {
        int node = -1;
        double slowdown = 0.0;
    };
    Recovered recovered(const std::vector<double>& probe, const std::vector<int>& nodeOfRank, int referenceNode,
                        std::uint32_t ranksPerNode);
    // Each probing benched node's slowdown so far (median of its window), by start-up node id.
    std::map<int, double> probeSlowdowns() const;

private:
    struct Sample {
        double ratio = 0.0;      // R
        std::vector<double> x;   // by rank of the layout; 0: not measured
    };
    // Each rank's slowdown over the newest `steps` samples (their median, or
    // its fastest or slowest step), then the slowest rank's of each pipeline
    // (0: none measured) and of each node.
    enum class Over { Median, Fastest, Slowest };
    std::vector<double> pipelineSlowdown(const Layout& layout, std::size_t steps, Over over = Over::Median) const;
    std::vector<std::pair<int, double>> nodeSlowdown(const Layout& layout, std::size_t steps) const;
    std::vector<double> rankSlowdown(std::size_t steps, Over over = Over::Median) const;
    // The steps of observe(): the sample of this step added to the window
    // (false: nothing measured); the split the measured slowdowns of the
    // newest `steps` call for, with the current split's step under them; a
    // node to retire (true, `verdict` set) or a note why the slowest stays;
    // a new split of the batch, when one pays.
    bool takeSample(const Layout& layout, const RunPlan& plan, const std::vector<double>& compute);
    std::pair<Instantiation, std::vector<double>> measuredSplit(const Layout& layout, const RunPlan& plan,
                                                                std::size_t steps, double& currentStep) const;
    bool considerRetiring(const Layout& layout, const RunPlan& plan, std::uint32_t liveNodes, std::uint32_t tolerance,
                          SpeedVerdict& verdict);
    void considerRebalancing(const Layout& layout, const RunPlan& plan, SpeedVerdict& verdict);
    StragglerPolicy policy_;
    std::vector<double> assumed_;
    std::deque<Sample> window_;
    std::map<int, std::deque<double>> probes_;  // benched node: its slowdown per step, newest last
    std::size_t sinceSplit_ = 0;  // samples taken since the batch was last split
    bool skipNext_ = true;
    bool noted_ = false;  // said once per layout why a slow node stays
};

}  // namespace kiln::plan
