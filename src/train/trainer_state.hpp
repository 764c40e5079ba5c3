// The state of one training run, shared by the loop (trainer.cpp: step,
// maybe-checkpoint, on-failure), one step to its commit (trainer_step.cpp),
// the work between steps that may meet a failure (trainer_boundary.cpp), the
// run's bookkeeping: diagnostics, layouts, checkpoints (trainer_state.cpp),
// recovery from failures (trainer_recovery.cpp), speeds (trainer_speeds.cpp),
// start-up and memory reports (trainer_usage.cpp) and admission
// (trainer_admission.cpp). Private to train/.
#pragma once

#include "kiln/comm/heartbeat.hpp"
#include "kiln/comm/spawn.hpp"
#include "kiln/comm/world.hpp"
#include "kiln/config/deck.hpp"
#include "kiln/data/loader.hpp"
#include "kiln/fault/fault_injector.hpp"
#include "kiln/io/diag_file.hpp"
#include "kiln/model/compute_threads.hpp"
#include "kiln/model/router_record.hpp"
#include "kiln/plan/regroup.hpp"
#include "kiln/plan/run_plan.hpp"
#include "kiln/plan/speed_monitor.hpp"
#include "kiln/train/checkpoint.hpp"
#include "kiln/train/checkpoint_manager.hpp"
#include "kiln/train/parallel_state.hpp"
#include "kiln/train/train_config.hpp"
#include "kiln/train/trainer.hpp"
#include "admission_watch.hpp"
#include "held_out_evaluation.hpp"
#include "membership.hpp"
#include "memory_watch.hpp"
#include "numeric_guard.hpp"
#include "recovery_coordinator.hpp"
#include "run_checkpoints.hpp"
#include "run_report.hpp"
#include "step_clock.hpp"
#include "straggler_probe.hpp"

#include <chrono>
#include <filesystem>
#include <functional>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace kiln::train {

using Clock = std::chrono::steady_clock;

inline double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// While it lives, the training thread has no step deadline (a checkpoint written or read may take long on a slow
// file system); then the boundary's limit again.
class NoStepDeadline {
public:
    explicit NoStepDeadline(const StepClock& clock) : clock_(clock) { comm::setTrainingThreadLimit(0); }
    ~NoStepDeadline() { comm::setTrainingThreadLimit(clock_.boundaryLimit()); }
    NoStepDeadline(const NoStepDeadline&) = delete;
    NoStepDeadline& operator=(const NoStepDeadline&) = delete;

private:
    const StepClock& clock_;
};

class Trainer::State {
public:
    State(const config::Deck& d, comm::World& w) : deck(d), world(w), membership([&w] { return rosterOf(w); }) {}
    // The start of a job's own ranks (trainer.cpp): sources, plan, model, a checkpoint restored, the loader.
    void startJob();
    // A process admitted into a running job (trainer_admission.cpp): prepared while the job trains, then the
    // job's state taken at its step boundary.
    void joinRunningJob(comm::JoinerLink& link);
    // The loop (trainer.cpp): steps to `untilStep`, each boundary's work, the final checkpoint.
    TrainSummary run(std::uint64_t untilStep);
    // What the run decided beyond the deck, as comment lines.
    const std::string& notes() const { return notes_; }

private:
    // Every part below is a member function of this class, in the file its comment names; the state a part
    // owns alone is an object of its own (StepClock, MemoryWatch, HeldOutEvaluation, RunCheckpoints,
    // AdmissionWatch, Membership, RunReport), and what is left here is what several parts read: the deck
    // and world, the plan, the running layout (parallel, loader) and the speed monitor. The layout changes
    // in one place only, changeLayout (trainer_recovery.cpp).
    const config::Deck& deck;
    comm::World& world;
    // Declared first, so destroyed last: the threads that call it (a background checkpoint's writer, the
    // gradient sums) are joined by members declared below, and the checkpoint hooks hold it as well.
    std::shared_ptr<fault::FaultInjector> injector;
    TrainConfig config;
    data::LoaderSpec spec;
    std::shared_ptr<data::Corpus> corpus;  // opened once, shared with the loader
    // Held-out validation (data.eval_mix; no sources: no evaluation): its data, when it is due, its record.
    HeldOutEvaluation evaluation;
    arch::ModelConfig modelConfig;
    plan::RunPlan plan;
    std::unique_ptr<ParallelState> parallel;
    std::unique_ptr<data::DataLoader> loader;
    // The run's checkpoints: store, writer, the write's fault injection points (run_checkpoints.hpp).
    std::unique_ptr<RunCheckpoints> checkpoints;
    data::CursorContext context;
    std::filesystem::path runDir;
    torch::Device device{torch::kCPU};
    // Each rank's peak FLOP/s (train.peak_tflops, or the device's from plan/flops.hpp); 0: none known, no MFU.
    double peakFlopsPerRank = 0.0;
    void choosePeak();
    // The MFU and hardware FLOPs utilization of `tokensPerSecond` on the current layout and live ranks.
    std::pair<double, double> utilization(double tokensPerSecond) const;
    // Who is in the job, what was retired, what the layout tolerates (membership.hpp).
    Membership membership;
    // On the rank that took an admission request: the new nodes' processes,
    // starting while the job trains, until the job takes them in (or gives
    // them up). Their nodes' count rides the step's collective once ready.
    AdmissionWatch admission;
    // Takes an admission request (rank 0, none starting) and starts its processes; reports one that failed.
    void watchAdmission(std::uint64_t step);
    // On the ranks that probe now: benched stragglers and the reference node
    // (Membership::referenceNode), so that the speed monitor can take a
    // straggler back once it has recovered.
    std::unique_ptr<StragglerProbe> probe;
    bool probesBeside = false;  // this rank is a benched straggler's: its probe runs beside the steps
    int referenceNode() const { return membership.referenceNode(parallel->layout().idleNodes); }
    // Who probes, for the current members: called with every new layout.
    void updateProbes();
    // diag.h5 and the log lines a user acts on, from the member that speaks for the job (run_report.hpp).
    RunReport report;
    std::string notes_;  // notes()
    std::unique_ptr<plan::SpeedMonitor> speeds;  // measured speeds against the plan (straggler.*)
    // Every step's loss and gradient norm checked before they are applied (numerics.*, numeric_guard.hpp).
    NumericGuard numerics{NumericPolicy{}};

    // What every process reads from the deck alone: configuration, data
    // sources, model, device, the run's directory. Not collective.
    model::ComputeThreads prepare(bool joining);
    // The deck's fault.inject for this process (none in a requeued attempt).
    void armInjector();

    // What diag.h5 is created with, once the plan is made (any member may come to hold it).
    void describeReport();
    // The layout of `inst` on the live nodes of the world that stay: nodes in
    // order at start-up; after a failure, each pipeline position on the node
    // that has most of its layers already (fewest bytes to migrate).
    plan::Layout layoutFor(const plan::Instantiation& inst) const;
    // `next` on the live nodes, keeping layers where they are and its kept pipelines on their nodes.
    plan::Layout layoutFor(const plan::Regroup& next) const;
    // The running layout's pipelines, whole where every node of one lives (plan::regroup keeps those).
    plan::Running running() const;
    // The regroup for the live nodes now, keeping the whole pipelines (a re-plan is said once, here).
    plan::Regroup regroupNow(std::uint64_t step) const;
    // The samples of the global batch this rank reads: its pipeline's, on the
    // first and last stages (inputs and targets); none elsewhere.
    void sliceLoader();
    // That slice: first sample and count (0, 0 on middle and idle ranks).
    std::pair<std::uint64_t, std::uint64_t> loaderSlice() const;
    // The one way a loader is made (the training stream at start-up or on joining, the held-out one for an
    // evaluation): `of`'s batches from `at`, sliced for this rank's place in the running layout.
    std::unique_ptr<data::DataLoader> openLoader(const data::LoaderSpec& of, std::shared_ptr<data::Corpus> from,
                                                 const data::Cursor& at) const;
    // Logs the current layout and records it in diag.h5; a new layout
    // (`newLayout`: not a rebalance of the same one) starts the speed
    // monitor afresh and settles who probes (updateProbes).
    void announceLayout(std::uint64_t step, bool pinned, const std::string& why, bool newLayout = true);
    // What a checkpoint holds now (RunCheckpoints::Contents) and where a written one is said.
    CheckpointManager::Source checkpointContents(LayerHolders holders) const;
    void reportCheckpoint(const CheckpointWrite& done, bool background);

    using Recovery = train::Recovery;
    // On every survivor after an attempt failed: regroup the surviving nodes
    // into pipelines from the start-up templates, move the layers each rank
    // now needs from surviving holders, and go on with the same step (the
    // ranks of retired nodes benched), or stop with a checkpoint beyond f.
    // The rounds and the decision are the RecoveryCoordinator's; this state
    // is its Survivors (trainer_recovery.cpp).
    class Survivors;
    // `cause`: the /failures row's (process; corruption when the survivors condemned a node whose numbers were wrong).
    Recovery recoverFromFailure(std::uint64_t step, double detectSeconds, const char* cause = "process");
    // The part of a regroup every member does once the nodes that stay are
    // known (retiredNodes): place `next`, move the layers, connect, slice the
    // loader. The live ranks of newly retired nodes say they are benched.
    // Throws ProcFailedError when a rank fails meanwhile.
    Regrouped regroupSurvivors(std::uint64_t step, const plan::Regroup& next);
    // What changeLayout did.
    struct LayoutChange {
        MigrationReport moved;
        std::uint64_t bytesMigrated = 0;  // over all ranks
        double migrateSeconds = 0.0, rebuildSeconds = 0.0;
    };
    // The one way the job's layout or members change (a recovery, an
    // admission, a straggler retired or back): the layers `layout` needs
    // moved (none: the layout stays and only the members changed, with the
    // live ranks of retired nodes as sources), the members taken, the
    // pipeline and gradient communicators rebuilt, the loader sliced.
    // Injections of `step` fire in its phases (migrate, received, migrated,
    // rebuild). Collective over the control communicator; throws
    // ProcFailedError, and plan::LayersLostError beyond f.
    LayoutChange changeLayout(std::optional<plan::Layout> layout, std::uint64_t step);
    // A failure seen by this rank: revoke the control communicator (every
    // survivor meets it at its next call and recovers) and interrupt the
    // pipelines' pending exchanges.
    void abandonStep();
    void reportTolerance(std::uint64_t step, const plan::Regroup& next, bool lowered);
    // After a regroup: `detail` in the log (KIND in capitals) and as a diag.h5
    // event `kind`, a lowered tolerance said, the new layout announced (`why`).
    void announceRegroup(std::uint64_t step, const std::string& kind, const std::string& detail,
                         const plan::Regroup& next, bool lowered, const std::string& why);

    // At the boundary before `step`, after the committed step `done`
    // gathered every rank's compute and probe times: the speed monitor's
    // verdict carried out (trainer_speeds.cpp). The batch split again, a
    // straggler node retired like a failed one (its ranks benched, probing),
    // or a retired straggler that recovered taken back; a failure meanwhile
    // is recovered from.
    struct Attempt;
    Recovery followSpeeds(std::uint64_t step, const Attempt& done);
    // Straggler node `node` (start-up id) is retired as a failed node would
    // be, its layers handed on first, its ranks benched; `why` in words.
    // Throws ProcFailedError.
    Recovery retireStraggler(std::uint64_t step, int node, const std::string& why);
    // Retired straggler node `node`, whose probes say it recovered (`why`),
    // is a live node again: a spare, or in the pipelines at once when the
    // job runs on fewer nodes than its start-up instantiation. Throws
    // ProcFailedError.
    Recovery takeBackStraggler(std::uint64_t step, int node, const std::string& why);
    // The baseline the memory report measures growth from, taken just before the model is built (memory_watch.hpp).
    MemoryWatch memory;
    // Collective: every rank's peak since then (on the CPU the resident
    // growth, on a GPU the device allocator's peak) against the planner's
    // bytes for its stage, in the log and diag.h5 (event 'memory').
    void reportMemory(std::uint64_t step);
    // What the speed monitor measured over its window (log line and diag.h5
    // event 'speeds'): compute against the plan, each pipeline's and the
    // slowest node's slowdown. Local: every rank holds the same.
    void reportSpeeds(std::uint64_t step);
    // After the first committed step of this start: each start-up phase's
    // seconds on the slowest rank (log line and diag.h5 event 'startup').
    // Collective; a failure meanwhile interrupts the next step instead.
    void reportStartup(std::uint64_t step);
    // Set by the start-up constructor: the job's own ranks report their
    // start-up together after the first step; processes admitted later do not.
    bool startupToReport = false;
    // Beyond f: some layer lost every holder, or the surviving nodes cannot
    // form one pipeline. A checkpoint of the last committed step, written by
    // surviving holders (the live ranks of retired nodes too), when every
    // layer still has one; exit 75 either way. `seconds` since the failure was noticed.
    Recovery stopBeyondF(std::uint64_t step, const std::string& what, const std::string& reason, double seconds);

    // One try at step `step` (trainer_step.cpp): this rank's stage of its
    // pipeline, the sums over replicas, the step's one collective (loss,
    // gradient norm, stop and admission requests, checkpoint writers, every
    // rank's compute time), then the agreement that commits it. A failed peer
    // marks the attempt failed and interrupts every communicator, so that no
    // survivor waits on the dead one.
    struct Attempt {
        bool ok = true;
        double seconds = 0.0;        // until it was committed or abandoned
        std::string dataError;       // a rank's batch could not be read: every rank stops with this
        double lossSum = 0.0, gradNorm = 0.0;
        double peakMemory = 0.0;     // bytes, the most of any rank
        bool stopRequested = false;  // some rank got the stop signal: all stop after this step
        int admitNodes = 0;          // nodes whose processes are ready to be admitted after this step
        int admitGivenUp = 0;        // nodes whose processes failed while they started
        int checkpointWriting = 0;   // ranks still writing their part of a background checkpoint
        std::uint64_t checkpointLost = 0;  // a checkpoint a failure kept from being published, as some rank knows
        StageWork work;
        double sync = 0.0;
        std::vector<double> compute;  // every rank's seconds computing, by rank
        std::vector<double> probe;    // every rank's straggler probe seconds (0: none), by rank
        // A mixture of experts' routers, summed over the pipelines (empty for a dense model).
        model::RouterRecord router;
        // What each rank made of it, and the spike bounds the ranks' histories give (numeric_guard.hpp).
        StepFigures figures;
        double lossBound = 0.0, normBound = 0.0;
        double sentPeak = 0.0;  // the largest magnitude any rank sent to a neighbouring stage, and that rank
        int peakRank = -1;
    };
    // `wait` gains the seconds spent waiting for the batch.
    Attempt attempt(std::uint64_t step, double targetsPerStep, double& wait);

    // Step `step` to its commit (trainer_step.cpp): attempts, each failed one
    // recovered from and the same batch replayed, then clipping, the update
    // and the loader's commit. Continue once committed (`done` filled), or
    // how the run ends on this rank.
    struct Committed {
        Attempt attempt;
        double wait = 0.0, lr = 0.0, optimizerSeconds = 0.0, stepSeconds = 0.0, loss = 0.0;
        data::Cursor before;  // the loader's cursor before the commit
        bool skipped = false;  // its batch consumed without an update (numerics.on_repeat = skip)
    };
    Recovery commitStep(std::uint64_t step, double targetsPerStep, Committed& done);
    // Attempts of step `step` until one is agreed, each failed one recovered from and the batch replayed.
    Recovery attemptUntilAgreed(std::uint64_t step, double targetsPerStep, Committed& done);
    // The numbers' check of an agreed attempt (numeric_guard.hpp), and a flagged one's answer
    // (trainer_numerics.cpp): its rerun from the same state, then the batch skipped, the run stopped (Numerics),
    // the node that parted the two runs retired and the step replayed, or the sound rerun kept; `done.attempt`
    // is what goes on.
    NumericVerdict judge(const Attempt& a, double targetsPerStep) const;
    Recovery answerNumericFlag(std::uint64_t step, double targetsPerStep, Committed& done, const NumericVerdict& flag);
    // Collective: every holder of a layer shard fingerprints its copy and the holders compare (replica_check.hpp);
    // an outvoted copy's node is retired, two copies that differ stop the job for a requeue (BeyondF). `compared`:
    // whether the comparison ran (a failure during it is recovered from instead). `at`: the step it comes before;
    // `step`: the one a failure during it is recorded at (as a boundary's work: the step just committed). An
    // outvoted copy that steps since the last agreement may have used ends in rollBack (RolledBack).
    Recovery compareReplicas(std::uint64_t at, std::uint64_t step, bool& compared);
    // Collective, after an outvoted copy's node was retired before step `at`: when numerics.rollback holds and
    // steps were applied since the copies last agreed, every survivor loads the last checkpoint (compared before
    // it was written) on the current layout and the loader returns to its step (RolledBack: the loop goes on from
    // loader->cursor().step); else those steps are kept and the log says so (Continue).
    Recovery rollBack(std::uint64_t at, std::uint64_t step);
    // The newest checkpoint this job started (written, or begun in the background), and one that a failure kept
    // from being published (0: none). After every recovery the new rank 0 compares the started one with `latest`
    // on disk: one rule for a writer that died in its write (abandoned by the survivors) and for rank 0 dying
    // while it published after every survivor agreed (which they believe published). Rank 0's view rides the
    // step's collective, and the first boundary after it takes a checkpoint of its own step, so that a failure
    // does not cost a requeue a whole interval.
    std::uint64_t checkpointStarted = 0;
    std::uint64_t checkpointLost = 0;
    // After a recovery, on the new rank 0: a checkpoint lost to it (above).
    void noticeLostCheckpoint();
    // The step boundary at which every layer's copies last agreed (a comparison, the start, a rollback's checkpoint).
    std::uint64_t lastAgreed = 0;
    // The spike history at each checkpoint this process wrote or started from (losses, norms), for a rollback.
    std::map<std::uint64_t, std::pair<std::vector<double>, std::vector<double>>> historyAtCheckpoint;
    void rememberHistoryAt(std::uint64_t step);
    // The nodes of `ranks` (current ranks) end their processes and the others recover, cause 'corruption'.
    Recovery retireForCorruption(std::uint64_t step, const std::vector<int>& ranks, const std::string& what);
    // fault.inject RANK:STEP:flip, as the step starts.
    void injectMemoryFault(std::uint64_t step);
    // Collective, on resuming from the checkpoint of step `step`: the spike history of the steps before it, from
    // diag.h5 (rank 0 reads, every rank gets it).
    void restoreNumericHistory(std::uint64_t step);
    // The committed step's /steps row.
    void recordStep(std::uint64_t step, const Committed& done, double targetsPerStep);
    // The progress line: loss, rate, ETA (`eta` seconds), tolerance.
    void logProgress(std::uint64_t step, const Committed& done, double tokensPerSecond, double eta) const;
    // How long the training thread may give no sign, at a boundary and inside a step (step_clock.hpp).
    StepClock clock{0.0, 0.0, 0.0};

    // The boundary after a committed step, before `step` (trainer_boundary.cpp).
    // Work there that fails on some rank is recovered from like a failed
    // step's, the step itself staying committed.
    // A background checkpoint whose parts every rank has written is published.
    Recovery publishFinishedCheckpoint(std::uint64_t step, const Attempt& done);
    // A checkpoint of the committed step `at`, written now or (`background`)
    // started now. A failure while it is written or started leaves the
    // previous one `latest`; the survivors recover as from a failed step and
    // the new layout writes (or starts) it again. `step` is where the fault
    // injector sees it.
    Recovery checkpointSafely(std::uint64_t at, std::uint64_t step, bool background);
    // The nodes an admission request asked for taken in (after a pending
    // background checkpoint is published: the newcomers take no part in it).
    Recovery admitAtBoundary(std::uint64_t step);
    // Said on every member: the `nodes` asked for were given up (their processes failed while they started).
    void admissionGivenUp(std::uint64_t step, int nodes);
    // The held-out evaluation after `steps` steps (trainer_eval.cpp): the
    // first train.eval_batches global batches of data.eval_mix through the
    // current pipelines, forwards only; its loss in the log and diag.h5
    // (/eval). A failure during it is recovered from and the evaluation redone
    // on the new layout. `step` is where the fault injector sees it.
    Recovery evaluateSafely(std::uint64_t steps, std::uint64_t step);
    // One evaluation on the current layout: the summed cross-entropy over every
    // target of the evaluated batches, the same on every rank. Throws
    // ProcFailedError when a rank fails meanwhile.
    double heldOutLossSum(std::uint64_t steps);
    Recovery atBoundary(std::uint64_t step, const char* what, const std::function<Recovery()>& work);

    // At the boundary before `step`, on every member: take in the new nodes
    // whose processes a member started and found ready (comm/spawn.hpp),
    // hand them the run's state and keep them as spares, or
    // put them at once into pipelines when the job runs with fewer than the
    // start-up instantiation's nodes (trainer_admission.cpp). A rank failing
    // meanwhile is recovered from like any failure.
    Recovery admit(std::uint64_t step);
    // The run's state for the processes being admitted.
    JoinState joinState() const;
    // A fresh run's start (trainer_start.cpp): the plan for this job's nodes
    // (its profile measured first when the deck leaves it to the run), said
    // on rank 0; the newest checkpoint that reads restored into the model,
    // optimizer and `cursor` (falling back to older ones, each said), which
    // it returns, or none; a Hugging Face model's weights when the deck names
    // one (model.init_from) and the run did not resume.
    void planJob();
    std::optional<std::filesystem::path> restoreLatest(data::Cursor& cursor);
    void initFromHuggingFaceModel(bool resumed);
    // What every member does once there are more live nodes (admitted, or a
    // straggler back; old and new processes alike, once the layout covers
    // the world): regroup onto them if that raises the pipelines in use
    // (else they are spares), connect, announce the layout (`why`). Returns
    // the regroup in words, or nothing when the new nodes are spares.
    std::string settleOnMoreNodes(std::uint64_t step, const std::string& why);
};

}  // namespace kiln::train
