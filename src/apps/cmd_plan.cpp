// kiln plan DECK: the pipeline templates for every node count and the
// instantiation for the cluster, with what-if failures.
#include "cli_options.hpp"
#include "kiln/config/deck.hpp"
#include "kiln/data/batch_planner.hpp"
#include "kiln/model/compute_threads.hpp"
#include "kiln/model/device.hpp"
#include "kiln/model/profiler.hpp"
#include "kiln/plan/instantiation.hpp"
#include "kiln/plan/plan_file.hpp"
#include "kiln/plan/regroup.hpp"
#include "kiln/plan/run_plan.hpp"
#include "kiln/base/error.hpp"
#include "subcommands.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <optional>

namespace kiln::apps {

int planMain(int argc, char** argv) {
    std::string deckPath;
    std::vector<std::string> overrides;
    std::uint32_t fail = 0;
    bool all = false;
    std::string out;
    po::options_description options("kiln plan");
    options.add_options()
        ("deck", po::value<std::string>(&deckPath)->required(), "the input deck")
        ("fail", po::value<std::uint32_t>(&fail)->default_value(0), "what if: the instantiation after this many node failures")
        ("all", po::bool_switch(&all), "print every template (default: at most 12)")
        ("out", po::value<std::string>(&out), "also write the templates and the instantiation to this HDF5 file")
        ("set", po::value<std::vector<std::string>>(&overrides)->composing(), "override a key: --set section.key=value");
    po::positional_options_description positional;
    positional.add("deck", 1);
    po::variables_map values;
    if (!parseCommandLine(argc, argv, "kiln plan DECK [--fail K] [--out plan.h5] [--set plan.nodes=N]", options, positional,
                          values))
        return 0;

    const auto deck = config::Deck::fromFile(deckPath, overrides);
    // The corpus's manifests are opened (its shards not checked) for the
    // tokenizer's vocabulary and, on CPU runs, for the loader's budget, which
    // shares host memory with the stages (counted as kiln run counts it). A
    // deck that gives its vocabulary can be planned before its data exists:
    // then without the loader, and said.
    const bool onCpu = deck.text("train.device") == "cpu";
    std::optional<data::Corpus> corpus;
    std::string noLoader;
    const auto openCorpus = [&] {
        corpus.emplace(data::loaderSpecFromDeck(deck), data::CorpusSharing{MPI_COMM_NULL, /*checkShards=*/false});
    };
    if (deck.integer("model.vocab") == 0) {
        openCorpus();
    } else if (onCpu) {
        try {
            openCorpus();
        } catch (const InputError& e) {
            noLoader = e.what();
        }
    }
    const auto model = model::modelConfigFromDeck(deck, corpus ? corpus->tokenizer().vocabSize : 0);
    auto cluster = plan::clusterFromDeck(deck, static_cast<std::uint32_t>(deck.integer("plan.nodes")));
    if (onCpu && corpus) cluster.loaderBytesPerRank = double(corpus->memoryBudget());
    if (cluster.nodes == 0) throw InputError(fmt::format("{}: kiln plan needs plan.nodes > 0 (the nodes to plan for)", deck.name()));
    // No profile in the deck and no speed to plan for: this machine's device, measured now.
    std::optional<plan::ModelProfile> measured;
    if (plan::profileMeasuredAtStartUp(deck)) {
        torch::Device device(torch::kCPU);
        try {
            device = model::chooseDevice(deck.text("train.device"), deck.setting("train.device").origin, 0);
        } catch (const InputError& e) {
            throw InputError(fmt::format("{}\n  kiln plan measures the deck's device when the deck gives no profile "
                                         "(plan.device_tflops = 0); to plan for a device this machine lacks, set "
                                         "plan.device_tflops (e.g. --set plan.device_tflops=400) or plan.profile",
                                         e.what()));
        }
        model::useComputeThreads(static_cast<int>(deck.integer("train.threads")), static_cast<int>(cluster.ranksPerNode));
        measured = model::profileModel(model, static_cast<std::uint64_t>(deck.integer("train.micro_batch")), 3, -1, device,
                                       deck.text("train.precision") == "bf16", /*eachKindOnce=*/true);
        measured->device = fmt::format("measured on this machine ({}, {} rank{} per node)", device.is_cuda() ? "cuda" : "cpu",
                                       cluster.ranksPerNode, cluster.ranksPerNode == 1 ? "" : "s");
    }
    const auto p = plan::planRun(deck, model, cluster, plan::LowerF::Never,
                                 measured ? plan::GivenProfile{&*measured, measured->device} : plan::GivenProfile{});
    fmt::print("kiln plan: {} layers ({:.2f} B parameters), {} nodes x {} ranks, {:.0f} GB per rank, profile {}\n",
               model.numLayers(), model.parameters() / 1e9, cluster.nodes, cluster.ranksPerNode, cluster.memoryPerRank / 1e9,
               p.profileSource);
    if (cluster.loaderBytesPerRank > 0)
        fmt::print("  every rank also holds the loader's {:.1f} MB (data.shard_memory_mb) beside its stage\n",
                   cluster.loaderBytesPerRank / 1e6);
    if (!noLoader.empty())
        fmt::print("  the loader's memory is not counted: its data could not be opened ({})\n", noLoader);
    fmt::print("{}", plan::describeTemplates(p, all));
    fmt::print("instantiation for {} nodes, at least f+1 = {} pipelines ({} microbatches of {}; {}; {:.1f} ms to plan):\n",
               p.cluster.nodes, p.f + 1, p.globalMicrobatches, p.microBatch,
               p.pinned ? "pinned by plan.pipelines" : "the planner's choice", 1e3 * p.instantiationSeconds);
    fmt::print("{}", plan::describeInstantiation(p.templates, p.instantiation, p.microBatch));
    if (p.spares > 0) fmt::print("  + {} spare node{}: idle until a node fails, then in its place\n", p.spares, p.spares == 1 ? "" : "s");
    if (!p.sparesNote.empty()) fmt::print("  {}\n", p.sparesNote);
    if (!out.empty()) {
        plan::writePlan(out, p.templates, p.instantiation, cluster.nodes, p.f, p.globalMicrobatches);
        fmt::print("  plan written to {}\n", out);
    }
    if (fail > 0) {
        // What recovery does (plan/regroup.hpp): spares first, then f + 1 pipelines while the nodes allow.
        const std::uint32_t left = cluster.nodes - std::min(fail, cluster.nodes);
        const auto r = plan::regroup(p, left);
        fmt::print("after {} node failure{} ({} node{} left):\n", fail, fail == 1 ? "" : "s", left, left == 1 ? "" : "s");
        if (!r.possible) {
            fmt::print("  too few nodes for one pipeline (at least {} needed): kiln writes a checkpoint from the surviving "
                       "holders and stops (exit 75); the jobscript requeues it and it plans for the nodes it gets.\n",
                       p.templates.minNodes);
        } else {
            if (r.spares > 0 || p.spares > 0)
                fmt::print("  {} of {} spare node{} left{}\n", r.spares, p.spares, p.spares == 1 ? "" : "s",
                           r.activeNodes == p.cluster.nodes ? ": the start-up layout, spares in the failed nodes' places" : "");
            fmt::print("  tolerance {} simultaneous node failure{}{}\n", r.tolerance, r.tolerance == 1 ? "" : "s",
                       r.degraded.empty() ? "" : fmt::format(" (below fault.f = {}: {})", p.f, r.degraded));
            fmt::print("{}", plan::describeInstantiation(p.templates, r.instantiation, p.microBatch));
        }
    }
    return 0;
}

}  // namespace kiln::apps
