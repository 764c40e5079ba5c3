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
#include "kiln/io/fence.hpp"
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
    runDir = std::filesystem::path(deck.text("run.out_dir")) / deck.text("run.name");
    checkpoints = std::make_unique<RunCheckpoints>(
        runDir / "ckpt", config.checkpointKeep, config.checkpointBackground, config.checkpointParallel,
        [this](LayerHolders holders) { return checkpointContents(std::move(holders)); },
        [this](const CheckpointWrite& done, bool background) { reportCheckpoint(done, background); });
    speeds = std::make_unique<plan::SpeedMonitor>(plan::stragglerPolicyFromDeck(deck));
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

Trainer::Trainer(const config::Deck& deck, comm::World& world) : state_(std::make_unique<State>(deck, world)) {
    State& s = *state_;
    const auto threads = s.prepare(/*joining=*/false);
    base::startupPhase("data_sources");  // the deck's sources opened, their shards checked

    s.planJob();
    base::startupPhase("plan");
    s.markMemoryBaseline();
    s.parallel = std::make_unique<ParallelState>(s.modelConfig, s.config, s.device, world, s.layoutFor(s.plan.instantiation));
    base::startupPhase("model_and_communicators");

    data::Cursor cursor = data::BatchPlanner(s.spec, *s.corpus).initial();
    const std::optional<std::filesystem::path> latest = s.restoreLatest(cursor);
    const bool resumed = latest.has_value();
    s.initFromHuggingFaceModel(resumed);
    base::startupPhase(resumed ? "resume" : "start_state");
    s.loader = s.openLoader(s.spec, s.corpus, cursor);
    base::startupPhase("loader");
    s.startupToReport = true;
    s.describeReport();
    if (world.rank() == 0)
        s.report.open(resumed, cursor.step, resumed ? "resume" : "start",
                      resumed ? fmt::format("from {} on {} ranks", latest->filename().string(), world.size())
                              : fmt::format("{} ranks, {} parameters", world.size(), s.modelConfig.parameters()));
    // This start's epoch: one more than any earlier attempt's, so that their stragglers are fenced too.
    std::uint64_t epoch = world.rank() == 0 ? io::publishedEpoch(s.runDir / "epoch") : 0;
    KILN_MPI(MPI_Bcast(&epoch, 1, MPI_UINT64_T, 0, world.control()));
    io::fence().arm(s.runDir / "epoch", epoch + 1);
    if (world.rank() == 0) io::fence().publish();
    if (!s.plan.sparesNote.empty()) s.report.event(cursor.step, "spares", s.plan.sparesNote);
    if (!s.plan.faultNote.empty()) s.report.event(cursor.step, "fault_f", s.plan.faultNote);
    s.announceLayout(cursor.step, s.plan.pinned, s.plan.pinned ? "pinned by plan.pipelines" : "the planner's choice");
    s.armInjector();
    log::info("  model      {}, vocabulary {}, {:.2f} M parameters; {} {}, {} core{} per rank ({})",
              s.modelConfig.shapeText(), s.modelConfig.vocabSize, s.modelConfig.parameters() / 1e6, s.device.str(), s.config.precision, threads.cores,
              threads.cores == 1 ? "" : "s",
              threads.blasThreads > 0
                  ? fmt::format("OpenBLAS {} thread{}, libtorch {}", threads.blasThreads,
                                threads.blasThreads == 1 ? "" : "s", threads.torchThreads)
                  : fmt::format("libtorch {} thread{}", threads.torchThreads, threads.torchThreads == 1 ? "" : "s"));
}

Trainer::~Trainer() = default;

std::string Trainer::notes() const { return state_->notes; }

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

TrainSummary Trainer::run(std::uint64_t untilStep) {
    State& s = *state_;
    const LocalErrorsAreFailures localErrors(s.world.faultTolerant());
    const std::uint64_t end = std::min(untilStep, s.config.steps);
    const double targetsPerStep = double(s.spec.globalBatch * s.spec.seqLen);
    TrainSummary summary;
    summary.firstStep = s.loader->cursor().step;
    const auto start = Clock::now();
    std::uint64_t stepsDone = 0;
    comm::setTrainingThreadLimit(s.stepLimit());
    struct NoLimitAfterwards {
        ~NoLimitAfterwards() { comm::setTrainingThreadLimit(0); }
    } noLimitAfterwards;

    const auto finish = [&](TrainSummary::Stop how) {
        summary.stopped = how;
        summary.lastStep = s.loader->cursor().step;
        summary.nodeFailures = s.membership.failures();
        summary.seconds = since(start);
        summary.tokensPerSecond = summary.seconds > 0 ? stepsDone * targetsPerStep / summary.seconds : 0.0;
        // Who is still in the job (start-up ranks, benched ones included): a fault test compares the
        // ranks missing here with the victims it chose, so that no death goes unnoticed, with a
        // /failures row or without (issue 50).
        s.report.event(summary.lastStep, "survivors", rankRanges(s.world.members()));
        return summary;
    };
    using State::Recovery::Continue;
    // Every outcome but Continue is a stop beyond f (checkpointed where possible).
    const auto beyondF = [&] { return finish(TrainSummary::Stop::BeyondF); };

    for (std::uint64_t step = s.loader->cursor().step; step < end; ++step) {
        State::Committed done;
        if (s.step(step, targetsPerStep, done) != Continue) return beyondF();
        if (stepsDone++ == 0) {
            summary.firstLoss = done.loss;
            if (s.startupToReport) {
                s.startupToReport = false;
                base::startupPhase("first_step");
                s.reportStartup(step + 1);
            }
        }
        summary.lastLoss = done.loss;
        s.recordStep(step, done, targetsPerStep);
        if ((step + 1) % s.config.logEvery == 0 || step + 1 == end) {
            const double elapsed = since(start);
            s.logProgress(step, done, stepsDone * targetsPerStep / elapsed, elapsed / stepsDone * double(end - step - 1));
        }

        const State::Attempt& a = done.attempt;
        const bool last = step + 1 == end;
        if (s.publishFinishedCheckpoint(step + 1, a) != Continue) return beyondF();
        if (!last && s.followSpeeds(step + 1, a) != Continue) return beyondF();
        if (s.evaluation.due(step + 1, s.config.steps) && s.evaluateSafely(step + 1, step) != Continue) return beyondF();
        const bool due = s.config.checkpointEvery > 0 && (step + 1) % s.config.checkpointEvery == 0;
        if (!last && (due || a.stopRequested) && s.checkpointSafely(step + 1, step, !a.stopRequested) != Continue)
            return beyondF();
        if (!last && a.stopRequested) {
            const std::string why = fmt::format("after step {} on a stop request (SIGUSR1 or KILN_STOP_FILE: a time "
                                                "limit ahead); checkpoint written, exit 75",
                                                step + 1);
            log::info("  STOP {}: a requeued job resumes from it", why);
            s.report.event(step + 1, "stop", why);
            return finish(TrainSummary::Stop::Requested);
        }
        if (a.admitGivenUp > 0) s.admissionGivenUp(step + 1, a.admitGivenUp);
        if (!last && a.admitNodes > 0 && s.admitAtBoundary(step + 1) != Continue) return beyondF();
    }
    if (stepsDone > 0) {
        // Before the final checkpoint, whose staging is not a step's memory.
        s.reportSpeeds(s.loader->cursor().step);
        try {
            s.reportMemory(s.loader->cursor().step);
        } catch (const ProcFailedError& e) {
            log::detail("a rank failed during the memory report: {}", e.what());
        }
        const auto at = s.loader->cursor().step;
        if (s.checkpointSafely(at, at, false) != Continue) return beyondF();
    }
    finish(TrainSummary::Stop::Finished);
    s.report.event(summary.lastStep, "end",
                   fmt::format("{} steps in {:.1f} s, loss {:.4f}", stepsDone, summary.seconds, summary.lastLoss));
    return summary;
}

}  // namespace kiln::train
