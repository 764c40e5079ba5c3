// kiln diag FILE: what a run did, from its diag.h5 (also while it runs).
// --plot DIR writes PNG plots with gnuplot: loss (training and held-out),
// throughput, per-source mix, and a mixture of experts' routers (router_plot.hpp).
#include "cli_options.hpp"
#include "kiln/base/error.hpp"
#include "kiln/io/diag_board.hpp"
#include "kiln/io/diag_summary.hpp"
#include "router_plot.hpp"
#include "subcommands.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string_view>

namespace kiln::apps {
namespace {

namespace fs = std::filesystem;

void plot(const fs::path& dir, const io::DiagSummary& summary) {
    const auto& steps = summary.steps;
    const auto& mix = summary.mix;
    const auto& sources = summary.sources;
    const auto& failures = summary.failures;
    const auto& evals = summary.evals;
    fs::create_directories(dir);
    const fs::path data = dir / "steps.dat";
    {
        std::ofstream out(data);
        out << "# step loss lr grad_norm tokens_per_s data_wait_share";
        for (const auto& s : sources) out << " share_" << s;
        out << "\n";
        for (std::size_t i = 0; i < steps.size(); ++i) {
            const auto& r = steps[i];
            out << r.step + 1 << ' ' << r.loss << ' ' << r.lr << ' ' << r.gradNorm << ' ' << r.tokens / r.stepTime << ' '
                << r.dataWait / r.stepTime;
            std::uint64_t total = 0;
            for (auto t : mix[i]) total += t;
            for (auto t : mix[i]) out << ' ' << (total ? double(t) / total : 0.0);
            out << "\n";
        }
    }
    const fs::path evalData = dir / "eval.dat";
    {
        std::ofstream out(evalData);
        out << "# step held_out_loss perplexity\n";
        for (const auto& e : evals) out << e.step << ' ' << e.loss << ' ' << e.perplexity << "\n";
    }
    const std::string heldOut =
        evals.empty() ? std::string()
                      : fmt::format(", '{}' using 1:2 with linespoints lw 2 pt 7 title 'held-out loss'", evalData.string());
    // A dashed red line at each failure, labelled with the failed ranks (orange: a node retired for wrong numbers):
    // the curves on either side should join. A purple one at each batch skipped for its numbers (issue 66).
    std::string markers;
    std::size_t marker = 0;
    for (const auto& f : failures) {
        const bool corruption = std::string(f.cause) == "corruption";
        markers += fmt::format("set arrow {0} from {1},graph 0 to {1},graph 1 nohead dt 2 lc rgb '{3}'\n"
                               "set label {0} '{4}: ranks {2}' at {1},graph 0.95 left offset 0.5,0 tc rgb '{3}'\n",
                               ++marker, f.step + 1, f.failedRanks, corruption ? "dark-orange" : "red",
                               corruption ? "corruption" : "failure");
    }
    // A cyan one where the survivors returned to a checkpoint after an outvoted copy: the steps after it are trained
    // again, and their curve (the last record of each step) is the failure-free one.
    for (const auto& e : summary.events) {
        if (std::string_view(e.kind) != "numerics") continue;
        const std::string_view detail(e.detail);
        if (detail.find("batch is skipped") != std::string_view::npos)
            markers += fmt::format("set arrow {0} from {1},graph 0 to {1},graph 1 nohead dt 3 lc rgb 'purple'\n"
                                   "set label {0} 'batch skipped' at {1},graph 0.88 left offset 0.5,0 tc rgb 'purple'\n",
                                   ++marker, e.step + 1);
        if (detail.find("(numerics.rollback)") != std::string_view::npos)
            markers += fmt::format("set arrow {0} from {1},graph 0 to {1},graph 1 nohead dt 4 lc rgb 'dark-cyan'\n"
                                   "set label {0} 'rolled back to the last checkpoint' at {1},graph 0.81 left offset 0.5,0 "
                                   "tc rgb 'dark-cyan'\n",
                                   ++marker, e.step + 1);
    }
    std::string script = fmt::format(
        "set terminal pngcairo size 900,500\nset grid\nset key top right\nset xlabel 'step'\n{2}"
        "set output '{0}/loss.png'\nset title 'loss: training and held-out'\nset ylabel 'loss (nats/token)'\n"
        "plot '{1}' using 1:2 with lines lw 2 title 'training loss'{3}\n"
        "set output '{0}/throughput.png'\nset title 'throughput'\nset ylabel 'tokens/s'\n"
        "plot '{1}' using 1:5 with lines lw 2 title 'tokens/s'\n"
        "unset arrow\nunset label\n"
        "set output '{0}/mix.png'\nset title 'per-source share of each global batch'\nset ylabel 'share'\nset yrange [0:1]\nplot ",
        dir.string(), data.string(), markers, heldOut);
    for (std::size_t s = 0; s < sources.size(); ++s)
        script += fmt::format("{}'{}' using 1:{} with lines lw 2 title '{}'", s ? ", " : "", data.string(), 7 + s, sources[s]);
    script += "\n";
    const std::string router = routerPlotScript(dir, summary);
    script += router;
    // Kept beside the plots, so that a user can restyle or re-render them (gnuplot plots.gp).
    std::ofstream(dir / "plots.gp") << script;
    FILE* gnuplot = popen("gnuplot", "w");
    if (!gnuplot) throw Error("cannot start gnuplot (install gnuplot-nox)", ErrorScope::AllRanks);
    std::fputs(script.c_str(), gnuplot);
    if (pclose(gnuplot) != 0) throw Error("gnuplot failed; plots not written", ErrorScope::AllRanks);
    fmt::print("plots: {0}/loss.png {0}/throughput.png {0}/mix.png{2} (data: {1}; script: {0}/plots.gp)\n", dir.string(),
               data.string(),
               router.empty() ? "" : fmt::format(" {0}/router.png {0}/experts.png", dir.string()));
}

void printJson(const std::string& path, const io::DiagSummary& s) {
    const auto& t = s.totals;
    nlohmann::json out;
    out["file"] = path;
    out["steps"] = s.steps.size();
    if (!s.steps.empty()) {
        out["first_loss"] = s.steps.front().loss;
        out["last_loss"] = s.steps.back().loss;
        out["tokens_per_s"] = t.tokens / t.time;
        out["seconds_per_step"] = t.time / double(s.steps.size());
        std::vector<double> times;
        for (const auto& r : s.steps) times.push_back(r.stepTime);
        out["median_step_s"] = io::medianOf(times);
        out["slowest_step_s"] = *std::max_element(times.begin(), times.end());
        out["share_data_wait"] = t.dataWait / t.time;
        out["share_forward"] = t.forward / t.time;
        out["share_backward"] = t.backward / t.time;
        out["share_sync"] = t.sync / t.time;
        out["share_optimizer"] = t.optimizer / t.time;
        out["share_pipeline_wait"] = t.pipelineWait / t.time;
    }
    if (!s.router.empty()) {
        // The last step's routers: the balance loss and z-loss means over the blocks, the busiest expert's share.
        const auto& last = s.router.back();
        const double blocks = s.routerShape.blocks;
        double balance = 0.0, z = 0.0;
        for (double b : last.balance) balance += b / blocks;
        for (double v : last.z) z += v / blocks;
        const auto shares = io::expertShares(last, s.routerShape);
        const double busiest = shares.empty() ? 0.0 : *std::max_element(shares.begin(), shares.end());
        out["router"] = {{"blocks", s.routerShape.blocks}, {"experts", s.routerShape.experts},
                         {"last_balance", balance}, {"last_z", z}, {"last_busiest_expert_share", busiest}};
    }
    out["source_tokens"] = nlohmann::json::object();
    for (std::size_t i = 0; i < s.sources.size(); ++i) out["source_tokens"][s.sources[i]] = s.tokensPerSource[i];
    out["instantiations"] = nlohmann::json::array();
    for (std::size_t i = 0; i < s.layouts.size(); ++i) {
        const auto& l = s.layouts[i];
        out["instantiations"].push_back({{"step", l.step}, {"time", l.time}, {"pipelines", l.pipelines},
                                         {"nodes_used", l.nodesUsed}, {"nodes_idle", l.nodesIdle},
                                         {"pinned", l.pinned != 0}, {"predicted_step_s", l.predictedStepTime},
                                         {"measured_step_s", s.measuredStepTime[i]}, {"layout", l.layout},
                                         {"ranks", l.ranks}, {"tolerance", l.tolerance}, {"spares", l.spares}});
    }
    out["failures"] = nlohmann::json::array();
    for (const auto& f : s.failures)
        out["failures"].push_back({{"step", f.step}, {"time", f.time}, {"failed_ranks", f.failedRanks},
                                   {"retired_nodes", f.retiredNodes}, {"rounds", f.rounds}, {"detect_s", f.detect},
                                   {"revoke_s", f.revoke}, {"shrink_s", f.shrink}, {"regroup_s", f.regroup},
                                   {"instantiate_s", f.instantiate}, {"migrate_s", f.migrate},
                                   {"rebuild_s", f.rebuild}, {"replay_s", f.replay},
                                   {"bytes_migrated", f.bytesMigrated}, {"layout", f.layout}, {"cause", f.cause}});
    out["eval"] = nlohmann::json::array();
    for (const auto& e : s.evals)
        out["eval"].push_back({{"step", e.step}, {"loss", e.loss}, {"perplexity", e.perplexity}, {"tokens", e.tokens},
                               {"seconds", e.seconds}, {"time", e.time}});
    out["events"] = nlohmann::json::array();
    for (const auto& e : s.events)
        out["events"].push_back({{"step", e.step}, {"time", e.time}, {"kind", e.kind}, {"detail", e.detail}});
    fmt::print("{}\n", out.dump());
}

void printSteps(const std::string& path, const io::DiagSummary& s) {
    const auto& t = s.totals;
    fmt::print("{}: {} steps recorded\n", path, s.steps.size());
    if (s.steps.empty()) return;
    fmt::print("  loss {:.4f} at step {} -> {:.4f} at step {}\n", s.steps.front().loss, s.steps.front().step + 1,
               s.steps.back().loss, s.steps.back().step + 1);
    fmt::print("  {:.0f} tokens in {:.1f} s of steps: {:.1f}k tokens/s, {:.1f} ms per step\n", t.tokens, t.time,
               t.tokens / t.time / 1e3, 1e3 * t.time / s.steps.size());
    fmt::print("  time shares (rank 0): data wait {:.1f}%, forward {:.1f}%, backward {:.1f}%, waiting for other "
               "stages {:.1f}%, gradient sync {:.1f}%, optimizer {:.1f}%, other {:.1f}%\n",
               100 * t.dataWait / t.time, 100 * t.forward / t.time, 100 * t.backward / t.time,
               100 * t.pipelineWait / t.time, 100 * t.sync / t.time, 100 * t.optimizer / t.time,
               100 * t.other() / t.time);
    for (std::size_t i = 0; i < s.sources.size(); ++i)
        fmt::print("  source {:<12} {:>12} tokens ({:.1f}%)\n", s.sources[i], s.tokensPerSource[i],
                   100.0 * s.tokensPerSource[i] / t.tokens);
}

void printEvals(const io::DiagSummary& s) {
    if (s.evals.empty()) return;
    const auto best =
        std::min_element(s.evals.begin(), s.evals.end(), [](const auto& a, const auto& b) { return a.loss < b.loss; });
    fmt::print("  held-out loss ({} tokens each; best {:.4f} after step {}):\n", s.evals.back().tokens, best->loss,
               best->step);
    for (const auto& e : s.evals)
        fmt::print("    after step {:>7}  loss {:.4f}  perplexity {:>9.2f}  ({:.2f} s)\n", e.step, e.loss, e.perplexity,
                   e.seconds);
}

void printLayouts(const io::DiagSummary& s) {
    fmt::print("  layouts (pipelines as nodes:microbatches; start-up ranks of their stages; median step against the "
               "planner's prediction):\n");
    for (std::size_t i = 0; i < s.layouts.size(); ++i) {
        const auto& l = s.layouts[i];
        const double measured = s.measuredStepTime[i];
        const std::string speed =
            measured > 0 && l.predictedStepTime > 0
                ? fmt::format("  step {:.1f} ms, predicted {:.1f} ms ({:.2f}x)", 1e3 * measured,
                              1e3 * l.predictedStepTime, measured / l.predictedStepTime)
                : std::string();
        fmt::print("    from step {:>7}  {:<16} tolerates {} node failure{} at once{}  ranks {}{}{}\n", l.step, l.layout,
                   l.tolerance, l.tolerance == 1 ? "" : "s",
                   l.spares > 0 ? fmt::format(", {} spare{}", l.spares, l.spares == 1 ? "" : "s") : std::string(),
                   l.ranks, l.pinned ? "  (pinned)" : "", speed);
    }
}

void printFailures(const io::DiagSummary& s) {
    if (s.failures.empty()) return;
    fmt::print("  failures (seconds of each phase of the recovery; start-up ranks and nodes):\n");
    fmt::print("    {:>7} {:>8} {:>6} {:>6} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>10} {:>8}  {}\n", "step", "ranks",
               "nodes", "rounds", "detect", "revoke", "shrink", "regroup", "choose", "migrate", "rebuild", "replay",
               "MB moved", "cause", "layout after");
    for (const auto& f : s.failures)
        fmt::print("    {:>7} {:>8} {:>6} {:>6} {:>8.4f} {:>8.4f} {:>8.4f} {:>8.4f} {:>8.5f} {:>8.4f} {:>8.4f} {:>8.4f} "
                   "{:>10.2f} {:>8}  {}\n",
                   f.step, f.failedRanks, f.retiredNodes, f.rounds, f.detect, f.revoke, f.shrink, f.regroup,
                   f.instantiate, f.migrate, f.rebuild, f.replay, f.bytesMigrated / 1e6, f.cause[0] ? f.cause : "-", f.layout);
}

// The numbers' check in one line (issue 66): flagged steps and what their reruns showed, the replicas' comparisons.
void printNumerics(const io::DiagSummary& s) {
    std::size_t flagged = 0, skipped = 0, compared = 0, disagreed = 0, corruption = 0, rollbacks = 0;
    for (const auto& e : s.events) {
        const std::string_view kind(e.kind), detail(e.detail);
        if (kind == "numerics" && detail.find("not applied, the step runs again") != std::string_view::npos) ++flagged;
        if (kind == "numerics" && detail.find("batch is skipped") != std::string_view::npos) ++skipped;
        if (kind == "numerics" && detail.find("(numerics.rollback)") != std::string_view::npos) ++rollbacks;
        if (kind == "replicas") {
            ++compared;
            if (detail.find("agree") == std::string_view::npos) ++disagreed;
        }
    }
    for (const auto& f : s.failures)
        if (std::string(f.cause) == "corruption") ++corruption;
    if (flagged + compared == 0) return;
    fmt::print("  numerics: {} step{} flagged and run again, {} batch{} skipped, {} node retirement{} for corruption; "
               "replicas compared {} time{}, {} disagreed{}\n",
               flagged, flagged == 1 ? "" : "s", skipped, skipped == 1 ? "" : "es", corruption, corruption == 1 ? "" : "s",
               compared, compared == 1 ? "" : "s", disagreed,
               rollbacks == 0 ? std::string()
                              : fmt::format("; {} rollback{} to the last checkpoint", rollbacks, rollbacks == 1 ? "" : "s"));
}

}  // namespace

int diagMain(int argc, char** argv) {
    std::string path, plotDir, boardDir;
    po::options_description options("kiln diag");
    options.add_options()
        ("file", po::value<std::string>(&path)->required(), "a run's diag.h5")
        ("plot", po::value<std::string>(&plotDir), "write loss.png, throughput.png and mix.png into this directory")
        ("json", "print the summary as one JSON object")
        ("losses", "print one line per step: step (from 0), loss and gradient norm, full precision")
        ("eval", "print one line per held-out evaluation: steps trained before it, loss and perplexity, full precision")
        ("tensorboard", po::value<std::string>(&boardDir),
         "write TensorBoard event files of the run into this directory (what run.tensorboard writes as a run goes)");
    po::positional_options_description positional;
    positional.add("file", 1);
    po::variables_map values;
    if (!parseCommandLine(argc, argv, "kiln diag RUN_DIR/diag.h5 [--plot DIR] [--json] [--losses] [--eval] [--tensorboard DIR]", options,
                          positional, values))
        return 0;

    if (!boardDir.empty()) {
        const auto steps = io::writeBoardFromDiag(path, boardDir);
        fmt::print("{}: {} step rows written as TensorBoard event files into {} (tensorboard --logdir {})\n", path, steps,
                   boardDir, boardDir);
        return 0;
    }
    const io::DiagSummary summary = io::summarize(io::readDiagRecords(path));
    if (values.count("losses")) {
        for (const auto& r : summary.steps) fmt::print("{} {:.17g} {:.17g}\n", r.step, r.loss, r.gradNorm);
        return 0;
    }
    if (values.count("eval")) {
        for (const auto& e : summary.evals) fmt::print("{} {:.17g} {:.17g}\n", e.step, e.loss, e.perplexity);
        return 0;
    }
    if (values.count("json")) {
        printJson(path, summary);
        return 0;
    }
    printSteps(path, summary);
    printEvals(summary);
    printLayouts(summary);
    printFailures(summary);
    printNumerics(summary);
    fmt::print("  events:\n");
    for (const auto& e : summary.events) fmt::print("    step {:>7}  {:<12} {}\n", e.step, e.kind, e.detail);
    if (!plotDir.empty() && !summary.steps.empty()) plot(plotDir, summary);
    return 0;
}

}  // namespace kiln::apps
