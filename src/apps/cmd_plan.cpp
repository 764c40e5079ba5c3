// kiln plan DECK: the pipeline templates for every node count and the
// instantiation for the cluster, with what-if failures.
#include "cli_options.hpp"
#include "kiln/config/deck.hpp"
#include "kiln/data/batch_planner.hpp"
#include "kiln/plan/instantiation.hpp"
#include "kiln/plan/plan_file.hpp"
#include "subcommands.hpp"

#include <fmt/format.h>

#include <chrono>
#include <filesystem>

namespace kiln::apps {
namespace {

std::string seconds(double s) { return s < 1.0 ? fmt::format("{:.1f} ms", 1e3 * s) : fmt::format("{:.3f} s", s); }

std::string stagesOf(const plan::PipelineTemplate& t) {
    std::string out;
    for (const auto& s : t.stages) {
        if (!out.empty()) out += " | ";
        out += s.endLayer - s.firstLayer == 1 ? fmt::format("{}", s.firstLayer) : fmt::format("{}-{}", s.firstLayer, s.endLayer - 1);
    }
    return out;
}

void printInstantiation(const plan::TemplateSet& set, const plan::Instantiation& inst, std::uint64_t microbatches,
                        std::uint64_t samplesPerMicrobatch) {
    fmt::print("  {} pipeline{} on {} node{} ({} idle); predicted step {}; {:.1f} samples/s\n", inst.pipelines.size(),
               inst.pipelines.size() == 1 ? "" : "s", inst.nodesUsed, inst.nodesUsed == 1 ? "" : "s", inst.nodesIdle,
               seconds(inst.stepTime), double(microbatches * samplesPerMicrobatch) / inst.stepTime);
    fmt::print("  {:>8} {:>6} {:>13} {:>12}\n", "pipeline", "nodes", "microbatches", "step time");
    for (std::size_t p = 0; p < inst.pipelines.size(); ++p)
        fmt::print("  {:>8} {:>6} {:>13} {:>12}\n", p, inst.pipelines[p].nodes, inst.pipelines[p].microbatches,
                   seconds(inst.pipelines[p].stepTime));
    (void)set;
}

}  // namespace

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
    const std::uint64_t microBatch = static_cast<std::uint64_t>(deck.integer("train.micro_batch"));
    const std::uint64_t microbatches = (static_cast<std::uint64_t>(deck.integer("data.global_batch")) + microBatch - 1) / microBatch;
    const auto f = static_cast<std::uint32_t>(deck.integer("fault.f"));

    plan::ModelProfile profile;
    const std::string profilePath = deck.text("plan.profile");
    if (profilePath.empty()) {
        profile = plan::syntheticProfile(model, microBatch, deck.real("plan.device_tflops"));
    } else {
        profile = plan::readProfile(profilePath);
        plan::requireSameModel(profile, model, profilePath);
    }

    const auto t0 = std::chrono::steady_clock::now();
    const auto set = plan::planTemplates(profile, cluster, f, microbatches);
    const auto t1 = std::chrono::steady_clock::now();
    fmt::print("kiln plan: {} layers ({:.2f} B parameters), {} nodes x {} ranks, {:.0f} GB per rank, profile {}\n",
               model.numLayers(), model.parameters() / 1e9, cluster.nodes, cluster.ranksPerNode, cluster.memoryPerRank / 1e9,
               profilePath.empty() ? profile.device : profilePath);
    fmt::print("templates for {}..{} nodes (f = {}), planned in {:.3f} s:\n", set.minNodes, set.maxNodes, f,
               std::chrono::duration<double>(t1 - t0).count());
    fmt::print("  {:>5} {:>6} {:>13} {:>11} {:>12} {:>12}  layers per stage\n", "nodes", "stages", "microbatches",
               "bottleneck", "fill+drain", "step time");
    const std::size_t count = set.templates.size();
    for (std::size_t i = 0; i < count; ++i) {
        if (!all && count > 12 && i >= 6 && i + 6 < count) {
            if (i == 6) fmt::print("  ... ({} more; --all prints them)\n", count - 12);
            continue;
        }
        const auto& t = set.templates[i];
        if (t.nodes == 0) {
            fmt::print("  {:>5}  no pipeline of this length fits in memory\n", set.minNodes + i);
            continue;
        }
        fmt::print("  {:>5} {:>6} {:>13} {:>11} {:>12} {:>12}  {}\n", t.nodes, t.stages.size(), t.referenceMicrobatches,
                   seconds(t.bottleneck()), seconds(t.latency()), seconds(t.stepTime(t.referenceMicrobatches)),
                   stagesOf(t));
    }
    const auto t2 = std::chrono::steady_clock::now();
    const auto inst = plan::instantiate(set, cluster.nodes, f + 1, microbatches);
    const auto t3 = std::chrono::steady_clock::now();
    fmt::print("instantiation for {} nodes, at least f+1 = {} pipelines ({} microbatches of {}; {:.1f} ms to plan):\n",
               cluster.nodes, f + 1, microbatches, microBatch, 1e3 * std::chrono::duration<double>(t3 - t2).count());
    printInstantiation(set, inst, microbatches, microBatch);
    if (!out.empty()) {
        plan::writePlan(out, set, inst, cluster.nodes, f, microbatches);
        fmt::print("  plan written to {}\n", out);
    }
    if (fail > 0) {
        if (fail > f)
            fmt::print("after {} failures (more than f = {}): kiln stops with its last checkpoint and the jobscript "
                       "requeues it; on restart it plans for the nodes it gets.\n",
                       fail, f);
        const std::uint32_t left = cluster.nodes - std::min(fail, cluster.nodes);
        const std::uint32_t keep = fail <= f ? f + 1 - fail : 1;
        const std::uint32_t wanted = std::max<std::uint32_t>(keep, std::min<std::uint32_t>(f + 1, left / set.minNodes));
        fmt::print("after {} node failure{}: {} nodes, at least {} pipeline{}:\n", fail, fail == 1 ? "" : "s", left, wanted,
                   wanted == 1 ? "" : "s");
        printInstantiation(set, plan::instantiate(set, left, wanted, microbatches), microbatches, microBatch);
    }
    return 0;
}

}  // namespace kiln::apps
