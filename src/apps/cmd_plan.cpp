// kiln plan DECK: the pipeline templates for every node count and the
// instantiation for the cluster, with what-if failures.
#include "cli_options.hpp"
#include "kiln/config/deck.hpp"
#include "kiln/data/batch_planner.hpp"
#include "kiln/plan/instantiation.hpp"
#include "kiln/plan/plan_file.hpp"
#include "kiln/plan/run_plan.hpp"
#include "kiln/base/error.hpp"
#include "subcommands.hpp"

#include <fmt/format.h>

#include <filesystem>

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
    std::uint32_t tokenizerVocab = 0;
    if (deck.integer("model.vocab") == 0) tokenizerVocab = data::Corpus(data::loaderSpecFromDeck(deck)).tokenizer().vocabSize;
    const auto model = model::modelConfigFromDeck(deck, tokenizerVocab);
    const auto cluster = plan::clusterFromDeck(deck, static_cast<std::uint32_t>(deck.integer("plan.nodes")));
    if (cluster.nodes == 0) throw InputError(fmt::format("{}: kiln plan needs plan.nodes > 0 (the nodes to plan for)", deck.name()));
    const auto p = plan::planRun(deck, model, cluster);
    fmt::print("kiln plan: {} layers ({:.2f} B parameters), {} nodes x {} ranks, {:.0f} GB per rank, profile {}\n",
               model.numLayers(), model.parameters() / 1e9, cluster.nodes, cluster.ranksPerNode, cluster.memoryPerRank / 1e9,
               p.profileSource);
    fmt::print("{}", plan::describeTemplates(p, all));
    fmt::print("instantiation for {} nodes, at least f+1 = {} pipelines ({} microbatches of {}; {}; {:.1f} ms to plan):\n",
               cluster.nodes, p.f + 1, p.globalMicrobatches, p.microBatch,
               p.pinned ? "pinned by plan.pipelines" : "the planner's choice", 1e3 * p.instantiationSeconds);
    fmt::print("{}", plan::describeInstantiation(p.templates, p.instantiation, p.microBatch));
    if (!out.empty()) {
        plan::writePlan(out, p.templates, p.instantiation, cluster.nodes, p.f, p.globalMicrobatches);
        fmt::print("  plan written to {}\n", out);
    }
    if (fail > 0) {
        if (fail > p.f)
            fmt::print("after {} failures (more than f = {}): kiln stops with its last checkpoint and the jobscript "
                       "requeues it; on restart it plans for the nodes it gets.\n",
                       fail, p.f);
        const std::uint32_t left = cluster.nodes - std::min(fail, cluster.nodes);
        const std::uint32_t keep = fail <= p.f ? p.f + 1 - fail : 1;
        const std::uint32_t wanted =
            std::max<std::uint32_t>(keep, std::min<std::uint32_t>(p.f + 1, left / p.templates.minNodes));
        fmt::print("after {} node failure{}: {} nodes, at least {} pipeline{}:\n", fail, fail == 1 ? "" : "s", left, wanted,
                   wanted == 1 ? "" : "s");
        fmt::print("{}", plan::describeInstantiation(p.templates, plan::instantiate(p.templates, left, wanted, p.globalMicrobatches),
                                                     p.microBatch));
    }
    return 0;
}

}  // namespace kiln::apps
