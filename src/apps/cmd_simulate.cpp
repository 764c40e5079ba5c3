// kiln simulate DECK: a whole run against a failure rate or trace, with
// kiln's own planner and recovery decisions, for choosing fault.f,
// cluster.spare_nodes and checkpoint.every from numbers.
#include "cli_options.hpp"
#include "failure_whatif.hpp"
#include "kiln/base/error.hpp"
#include "kiln/config/deck.hpp"
#include "kiln/plan/regroup.hpp"
#include "kiln/plan/run_plan.hpp"
#include "kiln/sim/costs.hpp"
#include "kiln/sim/failure_schedule.hpp"
#include "kiln/sim/silent_corruption.hpp"
#include "kiln/sim/simulation.hpp"
#include "planning_inputs.hpp"
#include "simulate_report.hpp"
#include "subcommands.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <sstream>

namespace kiln::apps {
namespace {

// Llama 3 405B: 419 unexpected interruptions on 16,384 GPUs in 54 days.
constexpr double kLlama3GpuMtbfHours = 16384.0 * 54 * 24 / 419;
// Of those, 6 were silent data corruption (Llama 3 paper, table 5).
constexpr double kLlama3GpuSdcHours = 16384.0 * 54 * 24 / 6;

std::vector<std::uint64_t> listOf(const std::string& option, const std::string& text) {
    std::vector<std::uint64_t> values;
    std::istringstream in(text);
    for (std::string item; std::getline(in, item, ',');) {
        std::size_t used = 0;
        unsigned long long v = 0;
        try {
            v = std::stoull(item, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (used == 0 || used != item.size() || item[0] == '-')
            throw InputError(fmt::format("--{} {}: \"{}\" is not a whole number >= 0; expected a list like 0,1,2", option,
                                         text, item));
        values.push_back(v);
    }
    if (values.empty()) throw InputError(fmt::format("--{}: expected a list like 0,1,2", option));
    return values;
}

// What `kiln simulate` was asked (its options).
struct SimulateOptions {
    std::string trace, traceFrom, fList, sparesList, everyList, costsFrom, plotDir, compareList;
    std::vector<std::string> costOverrides;
    double days = 54, stopAtSteps = 0, mtbf = 0, groupShare = 0, hangShare = 0.3, hostShare = 0, repairHours = -1,
           sdcNodeHours = 0;
    std::uint32_t groupNodes = 8, seeds = 1;
    bool sdcGiven = false, mtbfGiven = false, fGiven = false, sparesGiven = false, everyGiven = false, baselines = true, json = false;
};

struct Simulator {
    std::string deckPath;
    std::vector<std::string> overrides;
    std::uint32_t nodes = 0;
    PlanningInputs inputs;
    sim::SimCosts costs;
    double tokensPerStep = 0, seconds = 0, stopAtSteps = 0;
    double referenceRate = 0;  // tokens/s of the fastest failure-free layout
    std::vector<double> layerBytes;
    std::vector<std::vector<sim::FailureEvent>> schedules;  // the same for every choice
    bool quiet = false;  // no progress lines (--json)
    // The reference and every choice plan from one deck: their templates are planned once.
    mutable plan::TemplateCache templates;

    config::Deck deckWith(std::vector<std::string> more) const {
        auto all = overrides;
        all.push_back(fmt::format("plan.nodes={}", nodes));
        all.insert(all.end(), more.begin(), more.end());
        return config::Deck::fromFile(deckPath, all);
    }

    plan::RunPlan planFor(const config::Deck& deck) const {
        auto cluster = plan::clusterFromDeck(deck, nodes);
        cluster.loaderBytesPerRank = inputs.cluster.loaderBytesPerRank;
        return plan::planRun(deck, inputs.model, cluster, plan::LowerF::DownToMinF, inputs.given(), &templates);
    }

    double rateOf(const plan::Instantiation& inst) const {
        return tokensPerStep / (inst.stepTime * costs.stepScale.value);
    }

    // `choice` run on plan `p` under every schedule.
    void simulate(SimulatedChoice& choice, const plan::RunPlan& p, bool background) const {
        sim::RunSetup setup;
        setup.policy = choice.policy;
        setup.seconds = seconds;
        setup.stopAtSteps = stopAtSteps;
        setup.checkpointEvery = choice.checkpointEvery;
        setup.backgroundCheckpoints = background;
        setup.tokensPerStep = tokensPerStep;
        setup.referenceTokensPerSecond = referenceRate;
        setup.layerBytes = layerBytes;
        setup.ranksPerNode = inputs.cluster.ranksPerNode;
        choice.f = p.f;
        choice.spares = p.spares;
        choice.startLayout = fmt::format("{} pipelines, {} spare{}", p.instantiation.pipelines.size(), p.spares,
                                         p.spares == 1 ? "" : "s");
        for (const auto& schedule : schedules) choice.seeds.push_back(sim::simulate(p, costs, schedule, setup));
        if (!quiet)
            fmt::print(stderr, "  simulated {} ({} seed{}): {:.2f} %\n", choice.label, choice.seeds.size(),
                       choice.seeds.size() == 1 ? "" : "s", 100 * choice.mean());
    }
};

// What one node down costs the deck's own layout until its repair: a cause of "degraded" hours that
// the batch's fit to the nodes decides (docs/choosing.md), said before the hours themselves.
void describeNodeDown(const Simulator& sim, SimulateSummary& summary) {
    const auto own = sim.planFor(sim.deckWith({}));
    if (own.spares > 0 || sim.nodes < 2) return;  // a spare takes the node's place
    const auto layout = startLayout(own, sim.nodes);
    const auto after = afterFailures(own, layout, sim.nodes, defaultFailedNodes(layout, 1));
    if (!after.full.possible) return;
    summary.nodeDownKept = after.keptChange();
    summary.nodeDownFull = after.fullChange();
    summary.nodeDown = fmt::format("the step {:+.2f} % as recovery runs it until the node's repair ({:+.2f} % under a whole "
                                   "new plan){}",
                                   100 * summary.nodeDownKept, 100 * summary.nodeDownFull,
                                   summary.nodeDownKept > 0.001 ? "; the global batch fills the nodes: see docs/choosing.md"
                                                                : "");
}

// False when the command line only asked for help.
bool parseSimulateOptions(int argc, char** argv, Simulator& sim, SimulateOptions& o) {
    po::options_description options("kiln simulate");
    options.add_options()
        ("deck", po::value<std::string>(&sim.deckPath)->required(), "the input deck")
        ("nodes", po::value<std::uint32_t>(&sim.nodes), "the job's nodes (default: the deck's plan.nodes)")
        ("days", po::value<double>(&o.days)->default_value(54), "the run's wall time in days")
        ("node-mtbf-hours", po::value<double>(&o.mtbf),
         "mean hours between failures of one node (default: Llama 3's rate, 419 interruptions of 16,384 GPUs in 54 "
         "days, for the deck's GPUs per node)")
        ("trace", po::value<std::string>(&o.trace), "failures from a file instead: lines \"SECONDS NODE[,NODE...] [hang]\"")
        ("trace-from", po::value<std::string>(&o.traceFrom), "failures as a run met them, from its diag.h5")
        ("steps", po::value<double>(&o.stopAtSteps), "end the run once it has trained this many steps (--days: a cap): "
         "its wall time is the prediction")
        ("group-share", po::value<double>(&o.groupShare)->default_value(0.0),
         "the share of failures that take a group of nodes at once (a switch, a rack)")
        ("group-nodes", po::value<std::uint32_t>(&o.groupNodes)->default_value(8), "nodes in such a group")
        ("hang-share", po::value<double>(&o.hangShare)->default_value(0.3),
         "the share of failures that leave processes hung (found after fault.hang_timeout_s)")
        ("host-share", po::value<double>(&o.hostShare)->default_value(0.0),
         "the share of failures that take a host whole, its launcher daemon with it: recovered in place where the "
         "host's connections reset (kiln's launch relay); where it went silent (those of the hung share), in place once "
         "the heartbeat detector has declared all its ranks failed (the silent_host_s cost), or a requeue without "
         "the host when the survivors' deadline comes first (docs/faults.md)")
        ("repair-hours", po::value<double>(&o.repairHours),
         "hours until a failed node can be admitted again (0: never; default: the repair_s cost)")
        ("seeds", po::value<std::uint32_t>(&o.seeds)->default_value(1), "independent failure schedules per choice")
        ("f", po::value<std::string>(&o.fList), "fault.f values to compare, e.g. 0,1,2,3 (default: the deck's)")
        ("spares", po::value<std::string>(&o.sparesList), "cluster.spare_nodes values, e.g. 0,2,8 (default: the deck's)")
        ("checkpoint-every", po::value<std::string>(&o.everyList), "checkpoint.every values in steps (default: the deck's)")
        ("sdc-node-hours", po::value<double>(&o.sdcNodeHours),
         "mean node-hours between silent corruptions (default: Llama 3's, 6 of its 419 interruptions, for the deck's GPUs "
         "per node)")
        ("compare-every", po::value<std::string>(&o.compareList),
         "numerics.compare_every values to price against silent corruption (default: 1,10,100,1000 and the deck's)")
        ("no-baselines", "leave out checkpoint-restart at the Young/Daly interval and f counted per run")
        ("cost", po::value<std::vector<std::string>>(&o.costOverrides)->composing(),
         "replace a cost: NAME=VALUE (seconds, or GB/s for *_gb_s); the names are printed with the costs")
        ("costs-from", po::value<std::string>(&o.costsFrom), "a run's diag.h5: its recoveries' and steps' measured times")
        ("json", "print the results as one JSON object")
        ("plot", po::value<std::string>(&o.plotDir), "write simulation.png (throughput and tolerance over the run) here")
        ("set", po::value<std::vector<std::string>>(&sim.overrides)->composing(), "override a key: --set section.key=value");
    po::positional_options_description positional;
    positional.add("deck", 1);
    po::variables_map values;
    if (!parseCommandLine(argc, argv,
                          "kiln simulate DECK [--nodes N] [--days D] [--node-mtbf-hours H | --trace FILE] [--seeds K]\n"
                          "       [--f 0,1,2] [--spares 0,2,8] [--checkpoint-every 250,500] [--json] [--plot DIR]",
                          options, positional, values))
        return false;
    o.mtbfGiven = values.count("node-mtbf-hours") > 0;
    o.sdcGiven = values.count("sdc-node-hours") > 0;
    if (o.sdcGiven && !(o.sdcNodeHours > 0))
        throw InputError(fmt::format("--sdc-node-hours {}: expected node-hours > 0", o.sdcNodeHours));
    if (!o.compareList.empty()) listOf("compare-every", o.compareList);  // refused before anything is simulated
    o.fGiven = values.count("f") > 0;
    o.sparesGiven = values.count("spares") > 0;
    o.everyGiven = values.count("checkpoint-every") > 0;
    o.baselines = values.count("no-baselines") == 0;
    o.json = values.count("json") > 0;
    if (o.days <= 0) throw InputError(fmt::format("--days {}: expected a duration > 0", o.days));
    if (o.seeds == 0) throw InputError("--seeds 0: expected at least one schedule");
    if (o.groupShare < 0 || o.groupShare > 1 || o.hangShare < 0 || o.hangShare > 1 || o.hostShare < 0 || o.hostShare > 1)
        throw InputError("--group-share, --hang-share and --host-share are shares: expected 0 to 1");
    if (int(!o.trace.empty()) + int(!o.traceFrom.empty()) + int(o.mtbfGiven) > 1)
        throw InputError("--trace, --trace-from and --node-mtbf-hours: give one (a trace says when nodes fail)");
    return true;
}

// The failure schedules every choice meets: one trace, or one drawn schedule per seed. Sets
// o.mtbf (a trace's own rate) and says where the failures came from in `summary`.
std::vector<std::vector<sim::FailureEvent>> failureSchedules(SimulateOptions& o, const Simulator& sim,
                                                             SimulateSummary& summary) {
    std::vector<std::vector<sim::FailureEvent>> schedules;
    if (!o.trace.empty() || !o.traceFrom.empty()) {
        const std::string& from = o.traceFrom.empty() ? o.trace : o.traceFrom;
        schedules.push_back(o.traceFrom.empty() ? sim::readFailureTrace(from, sim.nodes)
                                                : sim::traceFromDiag(from, sim.nodes));
        summary.failuresFrom = fmt::format("{} failures from {}", schedules[0].size(), from);
        o.mtbf = schedules[0].empty() ? 0 : sim.nodes * sim.seconds / 3600 / double(schedules[0].size());
        return schedules;
    }
    const std::uint32_t ranksPerNode = sim.inputs.cluster.ranksPerNode;
    if (!o.mtbfGiven) o.mtbf = kLlama3GpuMtbfHours / ranksPerNode;
    if (o.mtbf <= 0) throw InputError(fmt::format("--node-mtbf-hours {}: expected hours > 0", o.mtbf));
    const sim::FailureModel model{sim.nodes, sim.seconds, o.mtbf, o.groupShare, o.groupNodes, o.hangShare, o.hostShare};
    for (std::uint32_t s = 1; s <= o.seeds; ++s) schedules.push_back(sim::drawFailures(model, s));
    summary.failuresFrom = fmt::format(
        "node MTBF {:.0f} h{} (the job: a failure every {:.2f} h), {} hung, {}{}{} seed{}", o.mtbf,
        o.mtbfGiven ? "" : fmt::format(" (Llama 3's rate for {} GPUs a node)", ranksPerNode), o.mtbf / sim.nodes,
        fmt::format("{:.0f} %", 100 * o.hangShare),
        o.hostShare > 0 ? fmt::format("{:.0f} % taking the host whole (in place; one gone silent is requeued when silent_host_s exceeds the survivors' deadline), ", 100 * o.hostShare) : "",
        o.groupShare > 0 ? fmt::format("{:.0f} % taking {} nodes at once, ", 100 * o.groupShare, o.groupNodes) : "",
        o.seeds, o.seeds == 1 ? "" : "s");
    return schedules;
}

// Every combination of the f, spares and checkpoint.every values asked for (the deck's where none).
void simulateChoices(const SimulateOptions& o, const config::Deck& deck, const Simulator& sim, SimulateSummary& summary) {
    const auto valuesOf = [&](bool given, const char* option, const std::string& list, const char* key) {
        return given ? listOf(option, list) : std::vector<std::uint64_t>{std::uint64_t(deck.integer(key))};
    };
    const auto fs = valuesOf(o.fGiven, "f", o.fList, "fault.f");
    const auto spares = valuesOf(o.sparesGiven, "spares", o.sparesList, "cluster.spare_nodes");
    const auto everies = valuesOf(o.everyGiven, "checkpoint-every", o.everyList, "checkpoint.every");
    const bool background = deck.flag("checkpoint.background");
    for (auto f : fs)
        for (auto sp : spares)
            for (auto every : everies) {
                SimulatedChoice choice;
                choice.label = fmt::format("f={} spares={} every={}", f, sp, every);
                choice.checkpointEvery = every;
                const auto p = sim.planFor(sim.deckWith({fmt::format("fault.f={}", f), fmt::format("fault.min_f={}", f),
                                                         fmt::format("cluster.spare_nodes={}", sp),
                                                         fmt::format("checkpoint.every={}", every)}));
                sim.simulate(choice, p, background);
                summary.choices.push_back(std::move(choice));
            }
}

// The best choice and its margin to the next. Choices equal to 0.01 points are a tie (well inside the
// spread of seeds): the higher f wins it (more failures survived at once), then fewer spares (fewer idle nodes).
void recommend(SimulateSummary& summary) {
    std::vector<std::size_t> order(summary.choices.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) {
        const auto &x = summary.choices[a], &y = summary.choices[b];
        const auto points = [](const SimulatedChoice& c) { return std::llround(c.mean() * 1e4); };
        if (points(x) != points(y)) return points(x) > points(y);
        if (x.f != y.f) return x.f > y.f;
        return x.spares < y.spares;
    });
    summary.recommended = order[0];
    if (order.size() > 1) {
        summary.margin = summary.choices[order[0]].mean() - summary.choices[order[1]].mean();
        summary.runnerUp = summary.choices[order[1]].label;
    }
}

// What kiln is compared with: checkpoint-restart alone at Young's interval (f = 0, every failure a
// requeue, blocking checkpoints) on the fastest layout `reference`, and the deck's own choice under
// the policy kiln had before (f counted per run). Returns the checkpoint-restart choice's index.
std::size_t simulateBaselines(const SimulateOptions& o, const config::Deck& deck, const Simulator& sim,
                              const plan::RunPlan& reference, SimulateSummary& summary) {
    double stateBytes = 0;
    for (double b : sim.layerBytes) stateBytes += b;
    const double delta = stateBytes / sim.costs.writeBandwidth.value;
    const double jobMtbf = o.mtbf * 3600 / sim.nodes;
    const double step = reference.instantiation.stepTime * sim.costs.stepScale.value;
    const double tau = sim::youngInterval(delta, jobMtbf);
    SimulatedChoice cr;
    cr.baseline = true;
    cr.policy = sim::Policy::CheckpointRestart;
    cr.checkpointEvery = std::max<std::uint64_t>(1, std::uint64_t(std::llround(tau / step)));
    cr.label = "checkpoint-restart, Young/Daly";
    const double restart = sim.costs.startup.value +
                           stateBytes * double(reference.instantiation.pipelines.size()) / sim.costs.readBandwidth.value;
    // Detection and the queue's wait: no failure interrupts them (the simulation's model too).
    const double fixed = (1 - o.hangShare) * sim.costs.detectEnded.value + o.hangShare * sim.costs.detectHung.value +
                         sim.costs.requeueWait.value;
    const double work = double(cr.checkpointEvery) * step;
    cr.closedForm = jobMtbf > 0 ? sim::dalyEfficiency(work, delta, restart, jobMtbf, fixed) : 1.0;
    sim.simulate(cr, reference, /*background=*/false);
    summary.choices.push_back(std::move(cr));
    const std::size_t crIndex = summary.choices.size() - 1;

    SimulatedChoice old;
    old.baseline = true;
    old.policy = sim::Policy::FPerRun;
    old.checkpointEvery = std::uint64_t(deck.integer("checkpoint.every"));
    old.label = fmt::format("f per run, f={} spares={}", deck.integer("fault.f"), deck.integer("cluster.spare_nodes"));
    sim.simulate(old, sim.planFor(sim.deckWith({})), deck.flag("checkpoint.background"));
    summary.choices.push_back(std::move(old));
    return crIndex;
}

// What the numeric checks and the replicas' comparisons cost on the deck's own layout against the
// silent corruptions they find (issue 66).
void priceSilentCorruption(const SimulateOptions& o, const config::Deck& deck, const Simulator& sim,
                           SimulateSummary& summary) {
    const auto own = sim.planFor(sim.deckWith({}));
    const auto& costs = sim.costs;
    const std::uint32_t ranksPerNode = sim.inputs.cluster.ranksPerNode;
    const std::size_t copies = own.instantiation.pipelines.size();
    double stateBytes = 0;
    for (double b : sim.layerBytes) stateBytes += b;
    auto& out = summary.silent;
    auto& s = out.setup;
    s.seconds = sim.seconds;
    s.nodes = sim.nodes;
    s.nodeHoursBetween = o.sdcGiven ? o.sdcNodeHours : kLlama3GpuSdcHours / ranksPerNode;
    s.stepSeconds = own.instantiation.stepTime * costs.stepScale.value;
    s.holders = std::uint32_t(copies);
    s.checkpointSeconds = double(deck.integer("checkpoint.every")) * s.stepSeconds;
    s.inStepShare = costs.inStepShare.value;
    s.checkShare = costs.checkShare.value;
    // Every rank reads its own weights and moments once; the fingerprints' all-gather is 8 bytes a layer.
    const double bytesPerRank = stateBytes * double(copies) / double(std::max(1u, own.instantiation.nodesUsed * ranksPerNode));
    s.compareSeconds = bytesPerRank / costs.memoryBandwidth.value;
    s.recoverySeconds = costs.recovery.value;
    s.restoreSeconds = stateBytes * double(copies) / costs.readBandwidth.value;
    s.requeueSeconds = costs.requeueWait.value + costs.startup.value + s.restoreSeconds;
    s.rollback = deck.flag("numerics.rollback");
    s.noticeSeconds = costs.notice.value;
    out.deckCheck = deck.flag("numerics.check");
    out.deckCompareEvery = std::uint64_t(deck.integer("numerics.compare_every"));
    std::vector<std::uint64_t> every = o.compareList.empty() ? std::vector<std::uint64_t>{1, 10, 100, 1000}
                                                             : listOf("compare-every", o.compareList);
    if (o.compareList.empty() && out.deckCompareEvery > 0) every.push_back(out.deckCompareEvery);
    out.rows = sim::silentCorruptionSweep(s, every);
    out.rateFrom = o.sdcGiven ? fmt::format("a corruption every {:.0f} node-hours", s.nodeHoursBetween)
                              : fmt::format("a corruption every {:.0f} node-hours: Llama 3's 6 in 54 days on 16,384 GPUs, "
                                            "for {} GPUs a node",
                                            s.nodeHoursBetween, ranksPerNode);
    out.layout = fmt::format("the deck's layout: {} cop{} of every layer, {:.3g} s a step, a checkpoint every {:.0f} s, "
                             "{:.3g} ms a comparison",
                             copies, copies == 1 ? "y" : "ies", s.stepSeconds, s.checkpointSeconds, 1e3 * s.compareSeconds);
}

}  // namespace

int simulateMain(int argc, char** argv) {
    Simulator sim;
    SimulateOptions o;
    if (!parseSimulateOptions(argc, argv, sim, o)) return 0;
    const auto t0 = std::chrono::steady_clock::now();
    const auto deck = config::Deck::fromFile(sim.deckPath, sim.overrides);
    if (sim.nodes == 0) sim.nodes = static_cast<std::uint32_t>(deck.integer("plan.nodes"));
    if (sim.nodes == 0) throw InputError(fmt::format("{}: give --nodes or plan.nodes (the job's nodes)", deck.name()));
    sim.inputs = planningInputs(sim.deckWith({}), "kiln simulate");
    sim.costs = sim::costsFor(deck, o.costsFrom, o.costOverrides);
    if (o.repairHours >= 0) sim.costs.repair = {o.repairHours * 3600, "s", fmt::format("--repair-hours {}", o.repairHours)};
    sim.seconds = o.days * 86400;
    sim.stopAtSteps = o.stopAtSteps;
    sim.quiet = o.json;
    sim.tokensPerStep = double(deck.integer("data.global_batch")) * double(sim.inputs.model.seqLen);
    for (std::uint32_t l = 0; l < sim.inputs.model.numLayers(); ++l)
        sim.layerBytes.push_back(12.0 * double(sim.inputs.model.parametersOf(l)));  // weights and two moments, fp32

    SimulateSummary summary;
    summary.deck = sim.deckPath;
    summary.nodes = sim.nodes;
    summary.ranksPerNode = sim.inputs.cluster.ranksPerNode;
    summary.days = o.days;
    sim.schedules = failureSchedules(o, sim, summary);
    summary.nodeMtbfHours = o.mtbf;

    // The reference: the fastest failure-free layout of all the nodes.
    const auto reference = sim.planFor(sim.deckWith({"fault.f=0", "fault.min_f=0", "cluster.spare_nodes=0", "plan.pipelines="}));
    // Shown (and in the closed form) at the reference's step; each simulated failure uses its layout's.
    sim.costs.detectHung.value = sim.costs.detectHungAt(reference.instantiation.stepTime * sim.costs.stepScale.value);
    sim.referenceRate = sim.rateOf(reference.instantiation);
    summary.reference = fmt::format("{} pipelines on {} nodes, {:.3g} s a step, {:.4g} M tokens/s (f = 0, no spares, the "
                                    "planner's fastest layout)",
                                    reference.instantiation.pipelines.size(), reference.instantiation.nodesUsed,
                                    reference.instantiation.stepTime * sim.costs.stepScale.value, sim.referenceRate / 1e6);
    for (auto& [name, cost] : sim.costs.named()) summary.costs.emplace_back(name, *cost);
    describeNodeDown(sim, summary);

    simulateChoices(o, deck, sim, summary);
    recommend(summary);
    std::vector<std::size_t> plotted{summary.recommended};
    if (o.baselines) plotted.push_back(simulateBaselines(o, deck, sim, reference, summary));
    priceSilentCorruption(o, deck, sim, summary);
    if (o.json) {
        printSimulateJson(summary);
    } else {
        printSimulateText(summary);
        fmt::print("simulated in {:.1f} s\n",
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    if (!o.plotDir.empty()) plotSimulation(o.plotDir, summary, plotted, o.json);
    return 0;
}

}  // namespace kiln::apps
