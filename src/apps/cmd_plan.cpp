// kiln plan DECK: the pipeline templates for every node count and the
// instantiation for the cluster, with what-if failures.
#include "cli_options.hpp"
#include "failure_whatif.hpp"
#include "kiln/config/deck.hpp"
#include "kiln/plan/instantiation.hpp"
#include "kiln/plan/plan_file.hpp"
#include "kiln/plan/regroup.hpp"
#include "kiln/plan/run_plan.hpp"
#include "kiln/base/error.hpp"
#include "planning_inputs.hpp"
#include "subcommands.hpp"

#include <fmt/format.h>

#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <sstream>

namespace kiln::apps {
namespace {

// The nodes that fail: those listed, or defaultFailedNodes.
std::vector<int> failedNodes(const plan::Layout& layout, std::uint32_t nodes, std::uint32_t count, const std::string& list) {
    if (list.empty()) return defaultFailedNodes(layout, count);
    std::vector<int> failed;
    std::string text = list;
    std::replace(text.begin(), text.end(), ',', ' ');
    std::istringstream in(text);
    for (std::string item; in >> item;) {
        std::size_t used = 0;
        long id = -1;
        try {
            id = std::stol(item, &used);
        } catch (const std::exception&) {
        }
        if (used != item.size() || id < 0 || id >= static_cast<long>(nodes))
            throw InputError(fmt::format("--fail-nodes {}: '{}' is not a node of this job (0..{})", list, item, nodes - 1));
        if (std::find(failed.begin(), failed.end(), int(id)) == failed.end()) failed.push_back(int(id));
    }
    if (failed.empty()) throw InputError(fmt::format("--fail-nodes '{}': expected node ids like 3,17", list));
    return failed;
}

// What recovery runs when `failed` nodes fail at once: the regroup that keeps the whole pipelines (as kiln
// run and kiln simulate do), with a new plan for the nodes left beside it.
void printAfterFailures(const plan::RunPlan& p, const plan::Layout& layout, std::uint32_t nodes,
                        const std::vector<int>& failed) {
    const auto fails = static_cast<std::uint32_t>(failed.size());
    const auto after = afterFailures(p, layout, nodes, failed);
    const std::uint32_t left = after.left;
    fmt::print("after {} node failure{} at once ({} node{} left; failed: node{} {}):\n", fails, fails == 1 ? "" : "s", left,
               left == 1 ? "" : "s", fails == 1 ? "" : "s", fmt::join(failed, ", "));
    const auto& full = after.full;
    if (!full.possible) {
        fmt::print("  too few nodes for one pipeline (at least {} needed): kiln writes a checkpoint from the surviving "
                   "holders and stops (exit 75); the jobscript requeues it and it plans for the nodes it gets.\n",
                   p.templates.minNodes);
        return;
    }
    const auto& r = after.kept;
    if (r.spares > 0 || p.spares > 0)
        fmt::print("  {} of {} spare node{} left{}\n", r.spares, p.spares, p.spares == 1 ? "" : "s",
                   r.activeNodes == p.cluster.nodes ? ": the start-up layout, spares in the failed nodes' places" : "");
    if (!r.keptFrom.empty())
        fmt::print("  recovery keeps {} pipeline{} as {} ran, patches {} (its nodes left take the failed nodes' layers) and "
                   "rebuilds {} (from its nodes left and idle ones); {} new\n",
                   r.kept, r.kept == 1 ? "" : "s", r.kept == 1 ? "it" : "they", r.patched, r.rebuilt,
                   r.instantiation.pipelines.size() - r.keptFrom.size());
    if (r.replanned) fmt::print("  {}\n", r.replan);
    fmt::print("  tolerance {} simultaneous node failure{}{}\n", r.tolerance, r.tolerance == 1 ? "" : "s",
               r.degraded.empty() ? "" : fmt::format(" (below fault.f = {}: {})", p.f, r.degraded));
    fmt::print("{}", plan::describeInstantiation(p.templates, r.instantiation, p.microBatch));
    const auto pipelines = full.instantiation.pipelines.size();
    fmt::print("  step {:.4g} s against {:.4g} s before the failure ({:+.2f} %); a whole new plan for the {} node{} left: "
               "{} pipeline{}, {:.4g} s ({:+.2f} %){}\n",
               r.instantiation.stepTime, after.before, 100 * after.keptChange(), left, left == 1 ? "" : "s", pipelines,
               pipelines == 1 ? "" : "s", full.instantiation.stepTime, 100 * after.fullChange(),
               r.replanned ? ", taken" : fmt::format(", not taken: fault.replan_margin = {:g}", p.replanMargin));
}

}  // namespace

int planMain(int argc, char** argv) {
    std::string deckPath;
    std::vector<std::string> overrides;
    std::uint32_t fail = 0;
    bool all = false;
    std::string out, failNodes;
    po::options_description options("kiln plan");
    options.add_options()
        ("deck", po::value<std::string>(&deckPath)->required(), "the input deck")
        ("fail", po::value<std::uint32_t>(&fail)->default_value(0),
         "what if: this many nodes fail at once (one in each of the first pipelines, their last): what recovery runs then")
        ("fail-nodes", po::value<std::string>(&failNodes),
         "what if: these nodes fail at once (ids of the start-up layout, as kiln run numbers them: 3,17)")
        ("all", po::bool_switch(&all), "print every template (default: at most 12)")
        ("out", po::value<std::string>(&out), "also write the templates and the instantiation to this HDF5 file")
        ("set", po::value<std::vector<std::string>>(&overrides)->composing(), "override a key: --set section.key=value");
    po::positional_options_description positional;
    positional.add("deck", 1);
    po::variables_map values;
    if (!parseCommandLine(argc, argv, "kiln plan DECK [--fail K | --fail-nodes LIST] [--out plan.h5] [--set plan.nodes=N]",
                          options, positional, values))
        return 0;
    if (fail > 0 && !failNodes.empty()) throw InputError("kiln plan: give --fail K or --fail-nodes LIST, not both");

    const auto deck = config::Deck::fromFile(deckPath, overrides);
    auto planning = planningInputs(deck, "kiln plan");
    const auto& model = planning.model;
    auto& cluster = planning.cluster;
    const auto& noLoader = planning.noLoader;
    const auto p = plan::planRun(deck, model, cluster, plan::LowerF::Never,
                                 planning.given());
    const bool whatIf = fail > 0 || !failNodes.empty();
    const auto layout = whatIf ? startLayout(p, cluster.nodes) : plan::Layout{};
    const auto failed = whatIf ? failedNodes(layout, cluster.nodes, fail, failNodes) : std::vector<int>{};
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
    if (whatIf) printAfterFailures(p, layout, cluster.nodes, failed);
    return 0;
}

}  // namespace kiln::apps
