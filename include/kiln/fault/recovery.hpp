// Recovery after a failure, on every survivor: revoke, shrink, agree on the
// failed set and retire the failed ranks' whole nodes. The live ranks of a
// retired node stay members of the control communicator, without work, until
// the job ends (benched): they hand on the layers they hold, then take part
// only in the step's collective and the agreements. Dismissing them would
// create a communicator after a failure, where Open MPI 5 can crash a healthy
// survivor (issue 19), and would finalize them while the job runs.
#pragma once

#include "kiln/comm/world.hpp"

#include <set>
#include <string>
#include <vector>

namespace kiln::fault {

struct RecoveryReport {
    std::vector<int> failedRanks;   // start-up ranks
    std::vector<int> retiredNodes;  // start-up node ids retired in this round
    int fenced = 0;                 // failed processes this rank killed (see recover)
    int ranksLeft = 0, nodesLeft = 0;  // those that stay: live ranks on nodes not retired
    int nodesBefore = 0;               // nodes not retired before this round (what a quorum counts against)
    int lowestNodeLeft = -1;           // the lowest start-up node id that stays (-1: none)
    // Hosts of failed ranks where no member survives: only such a host can be on the other side of a cut (a
    // failed rank whose host still has a survivor died; its host answers).
    int hostsLost = 0;
    double revokeSeconds = 0, shrinkSeconds = 0, regroupSeconds = 0;
    std::string describe() const;
};

// Collective over the survivors of world.control(). Afterwards
// world.control() is the shrunk communicator of every survivor, including
// the live ranks of retired nodes. `retired` (start-up node ids, the same on
// every survivor) are the nodes retired before; the report's retiredNodes are
// the failed ranks' nodes among the others, for the caller to retire. A failed rank may be hung
// rather than dead (declared failed by the heartbeat detector): the lowest
// surviving rank on its host kills it (SIGKILL), so that it can neither come
// back nor keep the job from ending.
RecoveryReport recover(comm::World& world, const std::set<int>& retired);

}  // namespace kiln::fault
