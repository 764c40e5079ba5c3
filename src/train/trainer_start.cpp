// The start of a fresh run (Trainer's first constructor): the plan for this
// job's nodes, the restore from the latest checkpoint that reads, and the
// weights of a Hugging Face model when the deck starts from one.
#include "trainer_state.hpp"

#include "kiln/base/error.hpp"
#include "kiln/base/log.hpp"
#include "kiln/base/startup_clock.hpp"
#include "kiln/comm/decision_check.hpp"
#include "kiln/comm/error_agreement.hpp"
#include "kiln/plan/plan_fingerprint.hpp"
#include "kiln/plan/run_plan.hpp"
#include "kiln/train/checkpoint.hpp"
#include "kiln/train/hf_export.hpp"
#include "kiln/train/hf_import.hpp"
#include "kiln/train/startup_profile.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <optional>

namespace kiln::train {

void Trainer::State::planJob() {
    // Plan for the nodes of this job: the same on every rank (a pure function of the deck and the node count).
    const LiveNodes nodes = membership.live();
    const auto& ids = nodes.ids;
    const auto& ranks = nodes.ranks;
    plan::ClusterSpec cluster = plan::clusterFromDeck(deck, static_cast<std::uint32_t>(ids.size()));
    cluster.nodes = static_cast<std::uint32_t>(ids.size());
    cluster.ranksPerNode = static_cast<std::uint32_t>(ranks.front().size());
    if (!device.is_cuda()) cluster.loaderBytesPerRank = double(corpus->memoryBudget());  // beside the stage
    for (std::size_t n = 0; n < ranks.size(); ++n)
        if (ranks[n].size() != cluster.ranksPerNode)
            throw InputError(fmt::format("node {} has {} ranks but node {} has {}: every node must run the same number of "
                                         "ranks (launch with a fixed number per node, or set cluster.ranks_per_node)",
                                         world.nodes().nodeNames[static_cast<std::size_t>(ids[n])], ranks[n].size(),
                                         world.nodes().nodeNames[static_cast<std::size_t>(ids[0])], cluster.ranksPerNode));
    std::optional<plan::ModelProfile> measured;
    if (plan::profileMeasuredAtStartUp(deck)) {
        measured = measureStartupProfile(modelConfig, config.microBatch, device, config.precision == "bf16",
                                         world.control());
        comm::requireAgreement(world.control(), plan::fingerprintOf(*measured), world.members());
        if (world.rank() == 0) {
            std::filesystem::create_directories(runDir);
            plan::writeProfile(startupProfilePath(runDir).string(), *measured);
        }
        base::startupPhase("profile");
    }
    plan = plan::planRun(deck, modelConfig, cluster, plan::LowerF::DownToMinF,
                           measured ? plan::GivenProfile{&*measured, measured->device} : plan::GivenProfile{});
    // What every later regroup starts from, and what runs now: agreed before anyone builds a stage.
    comm::requireAgreement(world.control(), plan::fingerprintOf(plan.templates), world.members());
    comm::requireAgreement(world.control(), plan::fingerprintOf(plan.instantiation), world.members());
    membership.start(cluster.nodes, plan::toleranceOf(plan.instantiation), plan.spares);
    if (!plan.sparesNote.empty()) notes_ += "# " + plan.sparesNote + "\n";
    if (!plan.faultNote.empty()) {
        notes_ += "# " + plan.faultNote + "\n";
        log::info("  faults     {}", plan.faultNote);
    }
    if (world.rank() == 0) {
        fmt::print("  plan       profile {}; {} nodes x {} rank{}, {:.0f} GB per rank\n", plan.profileSource, cluster.nodes,
                   cluster.ranksPerNode, cluster.ranksPerNode == 1 ? "" : "s", cluster.memoryPerRank / 1e9);
        fmt::print("{}", plan::describeTemplates(plan, false));
        if (plan.spares > 0)
            fmt::print("  spares     {} of the {} nodes wait idle and take a failed node's place\n", plan.spares,
                       cluster.nodes);
        if (!plan.sparesNote.empty()) fmt::print("  spares     {}\n", plan.sparesNote);
        fmt::print("instantiation for {} nodes, at least f+1 = {} pipelines ({} microbatches of {}; {}):\n", plan.cluster.nodes,
                   plan.f + 1, plan.globalMicrobatches, plan.microBatch,
                   plan.pinned ? "pinned by plan.pipelines" : "the planner's choice");
        fmt::print("{}", plan::describeInstantiation(plan.templates, plan.instantiation, plan.microBatch));
        std::fflush(stdout);
    }
}

std::optional<std::filesystem::path> Trainer::State::restoreLatest(data::Cursor& cursor) {
    if (world.rank() == 0)
        if (const auto stale = checkpoints->store().removeStaleTemporaries())
            log::info("  removed {} unfinished checkpoint file{} a killed run left", stale, stale == 1 ? "" : "s");
    std::optional<std::filesystem::path> latest;
    if (!config.resumeFrom.empty()) {
        latest = config.resumeFrom;
    } else if (config.resume) {
        latest = checkpoints->store().latest();
    }
    bool resumed = false;
    // The cosine horizon: the deck's train.decay_steps, or else fixed at the first
    // start from run.steps and kept from then on, so that raising run.steps on a
    // resume adds steps at the final learning rate instead of reshaping the rest.
    const bool horizonFromDeck = config.decaySteps > 0;
    if (!horizonFromDeck)
        config.decaySteps = config.steps > config.warmupSteps ? config.steps - config.warmupSteps : 1;
    if (latest) {
        data::Cursor saved;
        std::uint64_t savedHorizon = 0;
        // `latest`, then (when it cannot be read) the older complete ones, newest first; a checkpoint
        // named by checkpoint.from is the only one tried. Every rank reads its own layers: all agree.
        std::vector<std::filesystem::path> tries{*latest};
        if (config.resumeFrom.empty()) {
            const auto all = checkpoints->store().complete();
            for (auto it = all.rbegin(); it != all.rend(); ++it)
                if (it->filename() != latest->filename()) tries.push_back(*it);
        }
        for (std::size_t k = 0;; ++k) {
            std::string unreadable;
            try {
                CheckpointStore::load(tries[k], parallel->model(), parallel->optimizer(), context, saved, savedHorizon);
            } catch (const CheckpointUnreadable& e) {
                unreadable = e.what();
            } catch (const InputError& e) {
                throw InputError(fmt::format("{}\n  Checkpoints kept in {}: {}. Resume from another with --set "
                                             "checkpoint.from=FILE, or start afresh with --set checkpoint.resume=false.",
                                             e.what(), checkpoints->store().directory().string(), checkpoints->store().listing()));
            }
            unreadable = comm::firstError(world.control(), unreadable);
            if (unreadable.empty()) break;
            if (k + 1 == tries.size())
                throw InputError(fmt::format("{}\n  No checkpoint in {} can be restored ({}). Start afresh with --set "
                                             "checkpoint.resume=false, or name one with --set checkpoint.from=FILE.",
                                             unreadable, checkpoints->store().directory().string(), checkpoints->store().listing()));
            const std::string fallback = fmt::format("{} cannot be restored ({}); falling back to {}",
                                                     tries[k].filename().string(), unreadable, tries[k + 1].filename().string());
            if (world.rank() == 0) log::warn("{}", fallback);
            notes_ += "# " + fallback + "\n";
            latest = tries[k + 1];
        }
        cursor = data::BatchPlanner(spec, *corpus).resume(saved);
        resumed = true;
        log::info("  resumed from {} at step {}", latest->string(), cursor.step);
        if (!horizonFromDeck && savedHorizon > 0 && savedHorizon != config.decaySteps) {
            config.decaySteps = savedHorizon;
            notes_ += fmt::format("# train.decay_steps = 0: the cosine decay keeps the horizon of the run's first start, "
                                   "{} steps after warm-up (from {}), not run.steps = {}; set train.decay_steps to change "
                                   "it.\n",
                                   savedHorizon, latest->filename().string(), config.steps);
            log::info("  learning rate: cosine horizon {} steps after warm-up, kept from the first start (set "
                      "train.decay_steps to change it)",
                      savedHorizon);
        }
    }
    return resumed ? latest : std::nullopt;
}

void Trainer::State::initFromHuggingFaceModel(bool resumed) {
    if (!resumed && !config.initFrom.empty()) {
        // Every rank reads the config (the same verdict everywhere) and then its own layers' tensors.
        const auto hf = readHuggingFaceConfig(config.initFrom);
        if (const auto problem = initFromProblem(hf, modelConfig, config.initFrom); !problem.empty())
            throw InputError(problem, ErrorScope::AllRanks);
        initFromHuggingFace(config.initFrom, parallel->model());
        log::info("  model      weights from {} (Hugging Face {}); the optimizer starts fresh at step 0",
                  config.initFrom, huggingFaceArchitecture(hf));
    } else if (resumed && !config.initFrom.empty()) {
        log::info("  model      model.init_from = {} not used: the run resumed from a checkpoint", config.initFrom);
    }
}

}  // namespace kiln::train
