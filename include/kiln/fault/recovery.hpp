// Recovery after a failure, on every survivor: revoke, shrink, agree on the
// failed set, retire the failed ranks' whole nodes (their other ranks leave),
// and rebuild the control communicator from the ranks that stay.
#pragma once

#include "kiln/comm/world.hpp"

#include <string>
#include <vector>

namespace kiln::fault {

struct RecoveryReport {
    std::vector<int> failedRanks;   // start-up ranks
    std::vector<int> retiredNodes;  // start-up node ids
    bool thisRankLeaves = false;    // its node is retired: it must stop
    int fenced = 0;                 // failed processes this rank killed (see recover)
    int ranksLeft = 0, nodesLeft = 0;
    double revokeSeconds = 0, shrinkSeconds = 0, regroupSeconds = 0;
    std::string describe() const;
};

// Collective over the survivors of world.control(). Afterwards the staying
// ranks' world.control() is the new communicator. A failed rank may be hung
// rather than dead (declared failed by the heartbeat detector): the lowest
// surviving rank on its host kills it (SIGKILL), so that it can neither come
// back nor keep the job from ending.
RecoveryReport recover(comm::World& world);

}  // namespace kiln::fault
