// kiln plan DECK: the pipeline templates for every node count and the
// instantiation for the cluster, with what-if failures.
#include "cli_options.hpp"
#include "kiln/config/deck.hpp"
#include "kiln/plan/instantiation.hpp"
#include "kiln/plan/plan_file.hpp"
#include "kiln/plan/regroup.hpp"
#include "kiln/plan/run_plan.hpp"
#include "kiln/base/error.hpp"
#include "planning_inputs.hpp"
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
    auto planning = planningInputs(deck, "kiln plan");
    const auto& model = planning.model;
    auto& cluster = planning.cluster;
    const auto& noLoader = planning.noLoader;
    const auto p = plan::planRun(deck, model, cluster, plan::LowerF::Never,
                                 planning.given());
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
