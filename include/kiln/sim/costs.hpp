// What each event of a simulated run costs, each with where the figure came
// from: the deck (links, timeouts, the planner's step times), a measured run
// (--costs-from RUN/diag.h5: its recoveries' phases and its measured against
// predicted step time), or an assumption kiln cannot measure on its own (the
// queue's wait), which the user replaces with --cost NAME=VALUE.
#pragma once

#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace kiln::config {
class Deck;
}

namespace kiln::sim {

struct Cost {
    double value = 0.0;
    std::string unit;
    std::string source;
};

struct SimCosts {
    Cost detectEnded;        // s: a failure whose processes ended (MPI notices the ended process)
    Cost detectHung;         // s: a failure that leaves processes hung (the step's deadline, then as ended)
    Cost recovery;           // s: revoke, shrink, regroup, re-instantiate, rebuild (migration and replay apart)
    Cost interBandwidth;     // bytes/s into one node while layers migrate
    Cost admission;          // s: the job waits at a step boundary while admitted processes start
    Cost requeueWait;        // s: in the queue again after a stop beyond f
    Cost startup;            // s: a requeued job's start-up (launch, plan, data), before the restore
    Cost readBandwidth;      // bytes/s: the filesystem, all readers together (restoring a checkpoint)
    Cost writeBandwidth;     // bytes/s: the filesystem, all writers together (writing one)
    Cost hostCopyBandwidth;  // bytes/s per rank: a background checkpoint's copy to host memory
    Cost stepScale;          // measured over predicted step time (1: the planner's prediction)
    Cost repair;             // s until a failed node can be admitted again (0: never)
    Cost silentHost;         // s: every rank of a host gone silent declared failed on every host (heartbeats)
    Cost firstStep;          // s: a start's first step beyond its layout's step (lazy initialisation, first-touch memory)
    // Silent corruption (silent_corruption.hpp):
    Cost checkShare;         // numerics.check's cost, a share of every step
    Cost memoryBandwidth;    // bytes/s per rank: a comparison reads the rank's weights and moments once
    Cost inStepShare;        // the share of corruptions that show in their step (the rest only in one copy's state)
    Cost notice;             // s until a person notices a run trained on corrupt numbers
    // The step's deadline (fault.step_deadline, fault.step_deadline_floor_s; or fault.step_timeout_s as
    // the floor with steps 0): a hang is found after max(steps x the step, floor), then the process ends
    // and is found as an ended one. Both 0: detectHung as it is (given with --cost).
    double hangDeadlineSteps = 0.0, hangDeadlineFloor = 0.0;
    double detectHungAt(double stepSeconds) const {
        if (hangDeadlineSteps <= 0 && hangDeadlineFloor <= 0) return detectHung.value;
        return std::max(hangDeadlineSteps * stepSeconds, hangDeadlineFloor) + detectEnded.value;
    }
    // A host gone silent (power, a cut link): recovered in place once the heartbeat detector's verdict on all
    // its ranks reached every rank (silentHost), unless the survivors' wait for it ends first at the step's
    // deadline plus two heartbeat timeouts (heartbeat.hpp: communicationDeadline), which requeues the job.
    double heartbeatTimeout = 0.0;
    double silentHostDeadlineAt(double stepSeconds) const { return detectHungAt(stepSeconds) + 2 * heartbeatTimeout; }
    // Step seconds measured for layouts ("2:5+1:3", from --costs-from), in place of the planner's.
    std::map<std::string, double> measuredStepSeconds;

    // Every cost by its --cost name, in print order.
    std::vector<std::pair<std::string, Cost*>> named();
};

// The costs for `deck`: its links and timeouts, kiln's measured defaults and
// stated assumptions. `diagPath` (may be empty): a run's diag.h5 whose
// recoveries and step times replace the defaults. `overrides`: NAME=VALUE
// items (--cost), errors naming the item and the names.
SimCosts costsFor(const config::Deck& deck, const std::string& diagPath,
                  const std::vector<std::string>& overrides);

}  // namespace kiln::sim
