#include "kiln/train/trainer.hpp"

#include "trainer_state.hpp"

#include "kiln/base/error.hpp"
#include "kiln/base/log.hpp"
#include "kiln/base/startup_clock.hpp"
#include "kiln/comm/error_agreement.hpp"
#include "kiln/comm/heartbeat.hpp"
#include "kiln/comm/decision_check.hpp"
#include "kiln/comm/mpi_check.hpp"
#include "kiln/comm/ulfm.hpp"
#include "kiln/data/loader.hpp"
#include "kiln/fault/fault_injector.hpp"
#include "kiln/io/diag_file.hpp"
#include "kiln/io/diag_summary.hpp"
#include "kiln/io/fence.hpp"
#include "kiln/io/launch_record.hpp"
#include "kiln/model/compute_threads.hpp"
#include "kiln/model/device.hpp"
#include "kiln/plan/plan_fingerprint.hpp"
#include "kiln/plan/regroup.hpp"
#include "kiln/plan/run_plan.hpp"
#include "kiln/train/checkpoint.hpp"
#include "kiln/train/hf_import.hpp"
#include "kiln/train/parallel_state.hpp"
#include "kiln/train/startup_profile.hpp"
#include "kiln/train/train_config.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <optional>

namespace kiln::train {
namespace {

// Ranks as "0-1,4,6-7" (sorted): short for a job of thousands that lost a few.
std::string rankRanges(std::vector<int> ranks) {
    std::sort(ranks.begin(), ranks.end());
    std::vector<std::string> parts;
    for (std::size_t i = 0; i < ranks.size();) {
        std::size_t j = i;
        while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
        parts.push_back(i == j ? fmt::format("{}", ranks[i]) : fmt::format("{}-{}", ranks[i], ranks[j]));
        i = j + 1;
    }
    return fmt::format("{}", fmt::join(parts, ","));
}

}  // namespace

model::ComputeThreads Trainer::State::prepare(bool joining) {
    config = trainConfigFromDeck(deck);
    const auto threads = model::useComputeThreads(config.threads, world.ranksOnHost());
    spec = data::loaderSpecFromDeck(deck);
    // The job's ranks open the sources together; a process joining later reads
    // the manifests itself and trusts the job's check of the shards.
    corpus = std::make_shared<data::Corpus>(spec, data::CorpusSharing{joining ? MPI_COMM_NULL : world.control(), !joining});
    context = data::cursorContext(spec, corpus->tokenizer().id, corpus->tokenizer().legacyId);
    const data::LoaderSpec evalSpec = data::evalLoaderSpecFromDeck(deck);
    if (evalSpec.sources.empty() && deck.integer("train.eval_every") > 0)
        throw InputError(fmt::format("train.eval_every = {} ({}) but data.eval_mix names no held-out sources to evaluate",
                                     deck.integer("train.eval_every"), deck.setting("train.eval_every").origin));
    if (!evalSpec.sources.empty()) {
        auto evalCorpus = std::make_shared<data::Corpus>(evalSpec, data::CorpusSharing{joining ? MPI_COMM_NULL : world.control(), !joining});
        if (evalCorpus->tokenizer().id != corpus->tokenizer().id)
            throw InputError(fmt::format("data.eval_mix ({}): its sources were prepared with tokenizer {}, the training "
                                         "sources with {}: held-out losses would not be comparable",
                                         deck.setting("data.eval_mix").origin, evalCorpus->tokenizer().id,
                                         corpus->tokenizer().id));
        evaluation = HeldOutEvaluation(evalSpec, std::move(evalCorpus), config.evalEvery, config.evalBatches);
    }
    modelConfig = arch::modelConfigFromDeck(deck, corpus->tokenizer().vocabSize);
    device = model::chooseDevice(config.device, deck.setting("train.device").origin, world.rankOnHost());
    choosePeak();
    runDir = std::filesystem::path(deck.text("run.out_dir")) / deck.text("run.name");
    checkpoints = std::make_unique<RunCheckpoints>(
        runDir / "ckpt", config.checkpointKeep, config.checkpointBackground, config.checkpointParallel,
        [this](LayerHolders holders) { return checkpointContents(std::move(holders)); },
        [this](const CheckpointWrite& done, bool background) { reportCheckpoint(done, background); });
    speeds = std::make_unique<plan::SpeedMonitor>(plan::stragglerPolicyFromDeck(deck));
    numerics = NumericGuard(numericPolicyFromDeck(deck));
    clock = StepClock(config.stepTimeout, config.stepDeadlineSteps, config.stepDeadlineFloor);
    return threads;
}

void Trainer::State::armInjector() {
    std::vector<fault::Injection> injections;
    if (const auto problem = fault::parseInjections(deck.text("fault.inject"), injections); !problem.empty())
        throw InputError(fmt::format("fault.inject ({}): {}", deck.setting("fault.inject").origin, problem));
    // A requeued Slurm job runs the same command line: its injected faults would strike again.
    if (const char* restarts = std::getenv("SLURM_RESTART_COUNT");
        restarts && std::atoi(restarts) > 0 && !injections.empty()) {
        log::info("  faults     fault.inject ignored: this is requeued attempt {} of a Slurm job (faults are injected "
                  "into the first attempt only)",
                  std::atoi(restarts) + 1);
        injections.clear();
    }
    injector = std::make_shared<fault::FaultInjector>(injections, world.originalRank());
    checkpoints->arm(injector);
}

namespace {

// The previous attempt's launch ended without kiln's end record (a host lost whole: Open MPI 5.0's runtime
// cannot survive it): the launcher said what it knew, and the run's history gets its row (cause "launch").
void recordLaunchLoss(RunReport& report, std::uint64_t step, const std::vector<std::string>& hosts) {
    const auto lost = io::takeLaunchLoss();
    if (!lost) return;
    // First: the lost hosts as this attempt knows them (the launcher can name a host that lived).
    const std::string host = report.markTeardownCasualties(step, lost->host, hosts).lostHosts;
    io::FailureRecord row;
    row.step = step;
    row.time = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    io::fitText(row.cause, lost->kind);
    io::fitText(row.layout, host.empty() ? std::string("requeued") : "requeued without host " + host);
    report.failure(row);
    const std::string detail =
        fmt::format("the previous attempt {}{}: {}; this attempt resumes at step {}",
                    lost->kind == "deadline" ? "was ended by kiln for a requeue" : "ended without kiln's end record",
                    host.empty() ? "" : fmt::format(" (host {} lost)", host),
                    lost->cause.empty() ? std::string("the launcher gave no reason") : lost->cause, step);
    report.notice(step, "launch_lost", detail);
}

}  // namespace

void Trainer::State::restoreNumericHistory(std::uint64_t step) {
    // The committed steps before the checkpoint resumed from, as diag.h5 kept them (its latest row for each step):
    // a resumed run then judges its steps by the history the first attempt had, and skips the same batches.
    std::vector<double> history;  // losses, then norms
    if (world.rank() == 0) {
        try {
            const auto path = runDir / "diag.h5";
            if (std::filesystem::exists(path)) {
                const auto summary = io::summarize(io::readDiagRecords(path.string()));
                std::vector<double> losses, norms;
                for (const auto& s : summary.steps)
                    if (s.step < step) {
                        losses.push_back(s.loss);
                        norms.push_back(s.gradNorm);
                    }
                history = losses;
                history.insert(history.end(), norms.begin(), norms.end());
            }
        } catch (const std::exception& e) {
            log::warn("the spike history could not be read from diag.h5 ({}); spikes are judged once {} steps are "
                      "remembered again",
                      e.what(), numerics.policy().history);
            history.clear();
        }
    }
    std::uint64_t count = history.size();
    KILN_MPI(MPI_Bcast(&count, 1, MPI_UINT64_T, 0, world.control()));
    history.resize(count);
    KILN_MPI(MPI_Bcast(history.data(), static_cast<int>(count), MPI_DOUBLE, 0, world.control()));
    const auto half = static_cast<std::ptrdiff_t>(count / 2);
    numerics.restore({history.begin(), history.begin() + half}, {history.begin() + half, history.end()});
    log::detail("numerics: the spike history of {} committed steps before step {} restored from diag.h5", count / 2,
                step);
}

Trainer::Trainer(const config::Deck& deck, comm::World& world) : state_(std::make_unique<State>(deck, world)) {
    state_->startJob();
}

void Trainer::State::startJob() {
    const auto threads = prepare(/*joining=*/false);
    base::startupPhase("data_sources");  // the deck's sources opened, their shards checked

    planJob();
    base::startupPhase("plan");
    memory.markBaseline(device.is_cuda() ? device.index() : -1);
    parallel = std::make_unique<ParallelState>(modelConfig, config, device, world, layoutFor(plan.instantiation));
    base::startupPhase("model_and_communicators");

    data::Cursor cursor = data::BatchPlanner(spec, *corpus).initial();
    const std::optional<std::filesystem::path> latest = restoreLatest(cursor);
    const bool resumed = latest.has_value();
    initFromHuggingFaceModel(resumed);
    base::startupPhase(resumed ? "resume" : "start_state");
    loader = openLoader(spec, corpus, cursor);
    base::startupPhase("loader");
    startupToReport = true;
    if (resumed) restoreNumericHistory(cursor.step);
    // Copies made alike (seeded, or read from one checkpoint compared before it was written) agree.
    lastAgreed = cursor.step;
    if (resumed) rememberHistoryAt(cursor.step);
    describeReport();
    if (world.rank() == 0)
        report.open(resumed, cursor.step, resumed ? "resume" : "start",
                      resumed ? fmt::format("from {} on {} ranks", latest->filename().string(), world.size())
                              : fmt::format("{} ranks, {} parameters", world.size(), modelConfig.parameters()));
    // This start's epoch: one more than any earlier attempt's, so that their stragglers are fenced too.
    std::uint64_t epoch = world.rank() == 0 ? io::publishedEpoch(runDir / "epoch") : 0;
    KILN_MPI(MPI_Bcast(&epoch, 1, MPI_UINT64_T, 0, world.control()));
    io::fence().arm(runDir / "epoch", epoch + 1);
    if (world.rank() == 0) io::fence().publish();
    if (world.rank() == 0) {
        // Each node's host, for a later attempt that must tell a lost host's teardown from failures (run_report.hpp).
        report.event(cursor.step, "hosts", fmt::format("{}", fmt::join(world.nodes().nodeNames, " ")));
        recordLaunchLoss(report, cursor.step, world.nodes().nodeNames);
    }
    if (!plan.sparesNote.empty()) report.event(cursor.step, "spares", plan.sparesNote);
    if (!plan.faultNote.empty()) report.event(cursor.step, "fault_f", plan.faultNote);
    announceLayout(cursor.step, plan.pinned, plan.pinned ? "pinned by plan.pipelines" : "the planner's choice");
    armInjector();
    log::info("  model      {}, vocabulary {}, {:.2f} M parameters; {} {}, {} core{} per rank ({})",
              modelConfig.shapeText(), modelConfig.vocabSize, modelConfig.parameters() / 1e6, device.str(), config.precision, threads.cores,
              threads.cores == 1 ? "" : "s",
              threads.blasThreads > 0
                  ? fmt::format("OpenBLAS {} thread{}, libtorch {}", threads.blasThreads,
                                threads.blasThreads == 1 ? "" : "s", threads.torchThreads)
                  : fmt::format("libtorch {} thread{}", threads.torchThreads, threads.torchThreads == 1 ? "" : "s"));
}

Trainer::~Trainer() = default;

std::string Trainer::notes() const { return state_->notes(); }

TrainSummary Trainer::run(std::uint64_t untilStep) { return state_->run(untilStep); }

namespace {

// Local errors end only this process while the survivors can recover (see error.hpp).
struct LocalErrorsAreFailures {
    explicit LocalErrorsAreFailures(bool on) { setLocalErrorsAreFailures(on); }
    // Unwinding from an error, the flag stays for main's report of it.
    ~LocalErrorsAreFailures() {
        if (std::uncaught_exceptions() == 0) setLocalErrorsAreFailures(false);
    }
};

}  // namespace

TrainSummary Trainer::State::run(std::uint64_t untilStep) {
    const LocalErrorsAreFailures localErrors(world.faultTolerant());
    const std::uint64_t end = std::min(untilStep, config.steps);
    const double targetsPerStep = double(spec.globalBatch * spec.seqLen);
    TrainSummary summary;
    summary.firstStep = loader->cursor().step;
    const auto start = Clock::now();
    std::uint64_t stepsDone = 0;
    comm::setTrainingThreadLimit(clock.boundaryLimit());
    struct NoLimitAfterwards {
        ~NoLimitAfterwards() { comm::setTrainingThreadLimit(0); }
    } noLimitAfterwards;

    const auto finish = [&](TrainSummary::Stop how) {
        summary.stopped = how;
        summary.lastStep = loader->cursor().step;
        summary.nodeFailures = membership.failures();
        summary.seconds = since(start);
        summary.tokensPerSecond = summary.seconds > 0 ? stepsDone * targetsPerStep / summary.seconds : 0.0;
        // Who is still in the job (start-up ranks, benched ones included): a fault test compares the
        // ranks missing here with the victims it chose, so that no death goes unnoticed, with a
        // /failures row or without (issue 50).
        report.event(summary.lastStep, "survivors", rankRanges(world.members()));
        return summary;
    };
    using Recovery::Continue;
    // Every outcome but Continue (and RolledBack, below) is a stop beyond f (checkpointed where possible).
    const auto beyondF = [&] { return finish(TrainSummary::Stop::BeyondF); };

    // A rollback (numerics.rollback) sets the next step back to its checkpoint's.
    for (std::uint64_t step = loader->cursor().step, next = step + 1; step < end; step = next, next = step + 1) {
        Committed done;
        if (const auto outcome = commitStep(step, targetsPerStep, done); outcome == Recovery::RolledBack) {
            next = loader->cursor().step;
            continue;
        } else if (outcome != Continue) {
            return outcome == Recovery::Numerics ? finish(TrainSummary::Stop::Numerics) : beyondF();
        }
        if (done.skipped) {
            // Its batch consumed without an update (a 'numerics' event says why): no /steps row, no loss.
        } else if (stepsDone++ == 0) {
            summary.firstLoss = done.loss;
            if (startupToReport) {
                startupToReport = false;
                base::startupPhase("first_step");
                reportStartup(step + 1);
            }
        }
        if (!done.skipped) {
            summary.lastLoss = done.loss;
            recordStep(step, done, targetsPerStep);
        }
        if (stepsDone > 0 && ((step + 1) % config.logEvery == 0 || step + 1 == end)) {
            const double elapsed = since(start);
            logProgress(step, done, stepsDone * targetsPerStep / elapsed, elapsed / stepsDone * double(end - step - 1));
        }

        const Attempt& a = done.attempt;
        const bool last = step + 1 == end;
        if (publishFinishedCheckpoint(step + 1, a) != Continue) return beyondF();
        if (!last && followSpeeds(step + 1, a) != Continue) return beyondF();
        if (evaluation.due(step + 1, config.steps) && evaluateSafely(step + 1, step) != Continue) return beyondF();
        const bool periodic = config.checkpointEvery > 0 && (step + 1) % config.checkpointEvery == 0;
        // A checkpoint that a failure interrupted is taken again of the step just committed (its replicas compared
        // first, as for every checkpoint).
        const bool due = periodic || a.checkpointLost > 0;
        if (due && !periodic && !last && !a.stopRequested)
            log::info("  checkpoint of step {} was lost to a failure while written: taking one of step {} now", a.checkpointLost,
                      step + 1);
        // The replicas compared every numerics.compare_every steps and before every checkpoint (a checkpoint
        // is then only ever written of copies that agreed).
        const auto compareEvery = numerics.policy().compareEvery;
        bool compared = false;
        if (numerics.policy().check && ((compareEvery > 0 && (step + 1) % compareEvery == 0) || due || last)) {
            if (const auto outcome = compareReplicas(step + 1, step, compared); outcome == Recovery::RolledBack) {
                next = loader->cursor().step;
                continue;
            } else if (outcome != Continue) {
                return beyondF();
            }
        }
        if (!last && (due || a.stopRequested) && checkpointSafely(step + 1, step, !a.stopRequested) != Continue)
            return beyondF();
        if (!last && a.stopRequested) {
            const std::string why = fmt::format("after step {} on a stop request (SIGUSR1 or KILN_STOP_FILE: a time "
                                                "limit ahead); checkpoint written, exit 75",
                                                step + 1);
            log::info("  STOP {}: a requeued job resumes from it", why);
            report.event(step + 1, "stop", why);
            return finish(TrainSummary::Stop::Requested);
        }
        if (a.admitGivenUp > 0) admissionGivenUp(step + 1, a.admitGivenUp);
        if (!last && a.admitNodes > 0 && admitAtBoundary(step + 1) != Continue) return beyondF();
    }
    if (stepsDone > 0) {
        // Before the final checkpoint, whose staging is not a step's memory.
        reportSpeeds(loader->cursor().step);
        try {
            reportMemory(loader->cursor().step);
        } catch (const ProcFailedError& e) {
            log::detail("a rank failed during the memory report: {}", e.what());
        }
        const auto at = loader->cursor().step;
        if (checkpointSafely(at, at, false) != Continue) return beyondF();
    }
    finish(TrainSummary::Stop::Finished);
    report.event(summary.lastStep, "end",
                   fmt::format("{} steps in {:.1f} s, loss {:.4f}", stepsDone, summary.seconds, summary.lastLoss));
    return summary;
}

}  // namespace kiln::train
