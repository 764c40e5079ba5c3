// The recovery from a failure, on every survivor, in rounds: each round agrees
// on who failed and shrinks the world; a rank that fails during the recovery
// starts another round with the larger failed set, and the layers move only
// once a round completes. After each round the coordinator decides: the
// survivors regroup into the start-up templates and go on with the same step,
// or the job is beyond what its layout tolerates (a layer lost every holder,
// or too few nodes are left for one pipeline) and stops with a checkpoint.
// It keeps what the rounds found: the diag.h5 failure row and the words of the
// FAILURE line.
//
// It drives the trainer through Survivors, the few things a recovery needs of
// it, so that its rules have unit tests without MPI
// (tests/unit/test_recovery_coordinator.cpp). Private to train/.
#pragma once

#include "kiln/fault/recovery.hpp"
#include "kiln/io/diag_file.hpp"
#include "kiln/plan/regroup.hpp"
#include "kiln/plan/run_plan.hpp"

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::train {

// How a recovery (or any work between steps that met a failure) ends on this rank.
// BeyondF: a stop beyond what the layout tolerates (exit 75); Numerics: a stop on numbers that a rerun repeats
// (numerics.on_repeat = stop, exit 3); RolledBack: the run returned to its last checkpoint (numerics.rollback) and
// goes on from the loader's step.
enum class Recovery { Continue, BeyondF, Numerics, RolledBack };

// What a side of a job split by failures holds of the nodes that started the recovery: more than half,
// exactly half, or less. A side that holds less may be all that is left (the others crashed) or cut off
// from a majority that goes on, and cannot tell which: it stops (RecoveryCoordinator::Survivors::holdQuorum).
enum class QuorumSide { Majority, Half, Minority };
QuorumSide quorumSide(int nodesLeft, int nodesBefore);
// As a recovery judges it: while every failed rank's host still has a survivor, no cut can have split the
// job (the hosts answer; their ranks died), and the side is the whole job: a majority.
QuorumSide quorumSide(int nodesLeft, int nodesBefore, bool hostLost);
const char* quorumSideName(QuorumSide side);

// What a regroup of the survivors did.
struct Regrouped {
    double chooseSeconds = 0.0;    // placing the new instantiation on the nodes
    // The layers' transfers, until every survivor agreed: one number, diag.h5's migrate_s and the FAILURE
    // line's "migrated ... in" alike (issue 65: they were two).
    double migrateSeconds = 0.0;
    double rebuildSeconds = 0.0;   // communicators and stages for the new layout
    std::uint64_t bytesMigrated = 0;  // over all ranks
    bool lowered = false;             // the tolerance dropped below fault.f
    std::string layout;               // the new layout (plan::Layout::describe)
    std::string shares;               // its pipelines' shares of the batch (plan::sharesOf)
};

class RecoveryCoordinator {
public:
    // What a recovery needs of the trainer. Every call but layersWithoutLiveHolder
    // is collective over the survivors and may throw ProcFailedError, which
    // starts another round.
    class Survivors {
    public:
        virtual ~Survivors() = default;
        // One round of agreement: the failed set agreed, the world shrunk to
        // the survivors, the failed ranks' nodes retired (fault::recover).
        virtual fault::RecoveryReport agree() = 0;
        // After a round is agreed: diag.h5 with the member that speaks for
        // the job now.
        virtual void agreed() = 0;
        // Layers of the running layout that no live rank holds.
        virtual std::vector<std::uint32_t> layersWithoutLiveHolder() const = 0;
        // The running layout's pipelines, whole where all of one's nodes live (what a regroup keeps).
        virtual plan::Running running() const = 0;
        // The survivors placed as `next`, the layers they need moved, connected.
        virtual Regrouped regroup(const plan::Regroup& next) = 0;
        // The job goes on: the failure row (`record`), the FAILURE line
        // (`detail`), the tolerance and the new layout (`why`) reported.
        virtual void recovered(const io::FailureRecord& record, const std::string& detail, const plan::Regroup& next,
                               bool lowered, const std::string& why) = 0;
        // Before a stop beyond f: every survivor agrees that no rank failed
        // since the round (nobody may have talked to one that died in
        // agreed()); throws ProcFailedError on every survivor if one did, so
        // that another round names it in the failure row.
        virtual void confirm() = 0;
        // Beyond f (`reason`): a checkpoint if every layer still has a holder,
        // the failure row recorded, exit 75. `what` the rounds in words. A
        // rank failing meanwhile throws ProcFailedError (another round).
        virtual Recovery stop(const io::FailureRecord& record, const std::string& what, const std::string& reason,
                              double seconds) = 0;
        // A rank failed during the recovery: every survivor is sent back to
        // the start of a round.
        virtual void abandon() = 0;
        // Whether this side of the job may go on (DESIGN.md invariant 10): a minority may not; a majority or
        // exactly half claims the recovery's quorum witness in the run directory and goes on if it holds it.
        // Collective; the same answer on every survivor.
        virtual bool holdQuorum(QuorumSide side) = 0;
        // This side lost the quorum (`why`): it ends at once, writing nothing (no checkpoint, no diag.h5
        // row); the side that holds the quorum sees its ranks fail. Does not return.
        [[noreturn]] virtual void standDown(const std::string& why) = 0;
    };

    // After a round: the regroup, or why the job is beyond f (`next` unused then).
    struct Verdict {
        bool beyondF = false;
        std::string reason;
        plan::Regroup next;
    };
    // The rule, from the round's outcome alone: a layer with no live holder,
    // or fewer nodes than the smallest template, is beyond f. Otherwise the
    // regroup keeps `running`'s whole pipelines (plan::regroup).
    static Verdict decide(const plan::RunPlan& plan, const std::vector<std::uint32_t>& layersLost, int nodesLeft,
                          const plan::Running& running);

    // A failure at `step`, noticed after `detectSeconds`.
    // `cause`: the /failures row's (process; corruption when the survivors condemned a node's numbers).
    RecoveryCoordinator(const plan::RunPlan& plan, std::uint64_t step, double detectSeconds, const char* cause = "process");

    // Rounds until the survivors agree and regroup, or stop beyond f.
    Recovery run(Survivors& survivors);

    std::string what() const;  // each round in words, "; then " between them

private:
    void addRound(const fault::RecoveryReport& round);
    // Beyond f for `reason`: confirm the failed set, then the stop.
    Recovery stopBeyondF(Survivors& survivors, const std::string& reason);
    std::string regroupReason(const plan::Regroup& next) const;
    double seconds() const;

    const plan::RunPlan& plan_;
    std::chrono::steady_clock::time_point start_;
    io::FailureRecord record_;
    std::vector<std::string> rounds_;
    std::vector<int> failedRanks_, retiredNodes_;
    int nodesAtStart_ = 0;  // nodes not retired when the recovery began (its first round's)
    bool hostLost_ = false;  // some round lost a host whole: this side may be one of a cut
};

}  // namespace kiln::train
