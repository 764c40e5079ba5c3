// kiln diag FILE: what a run did, from its diag.h5 (also while it runs).
// --plot DIR writes PNG plots with gnuplot: loss (training and held-out),
// throughput, per-source mix.
#include "cli_options.hpp"
#include "kiln/base/error.hpp"
#include "kiln/io/diag_file.hpp"
#include "kiln/io/parallel_file.hpp"
#include "subcommands.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

namespace kiln::apps {
namespace {

namespace fs = std::filesystem;

// A resumed run re-records the steps after its checkpoint: the last record of a step wins.
std::vector<io::StepRecord> latestPerStep(const std::vector<io::StepRecord>& records, std::vector<std::size_t>& rows) {
    std::map<std::uint64_t, std::size_t> last;
    for (std::size_t i = 0; i < records.size(); ++i) last[records[i].step] = i;
    std::vector<io::StepRecord> out;
    for (const auto& [step, i] : last) {
        out.push_back(records[i]);
        rows.push_back(i);
    }
    return out;
}

// The same for evaluations: one per step count, the last recorded.
std::vector<io::EvalRecord> latestPerStep(const std::vector<io::EvalRecord>& records) {
    std::map<std::uint64_t, io::EvalRecord> last;
    for (const auto& r : records) last[r.step] = r;
    std::vector<io::EvalRecord> out;
    for (const auto& [step, r] : last) out.push_back(r);
    return out;
}

void plot(const fs::path& dir, const std::vector<io::StepRecord>& steps, const std::vector<std::vector<std::uint64_t>>& mix,
          const std::vector<std::string>& sources, const std::vector<io::FailureRecord>& failures,
          const std::vector<io::EvalRecord>& evals) {
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
    // A dashed red line at each failure, labelled with the failed ranks: the curves on either side should join.
    std::string markers;
    for (std::size_t i = 0; i < failures.size(); ++i)
        markers += fmt::format("set arrow {0} from {1},graph 0 to {1},graph 1 nohead dt 2 lc rgb 'red'\n"
                               "set label {0} 'failure: ranks {2}' at {1},graph 0.95 left offset 0.5,0 tc rgb 'red'\n",
                               i + 1, failures[i].step + 1, failures[i].failedRanks);
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
    FILE* gnuplot = popen("gnuplot", "w");
    if (!gnuplot) throw Error("cannot start gnuplot (install gnuplot-nox)", ErrorScope::AllRanks);
    std::fputs(script.c_str(), gnuplot);
    if (pclose(gnuplot) != 0) throw Error("gnuplot failed; plots not written", ErrorScope::AllRanks);
    fmt::print("plots: {0}/loss.png {0}/throughput.png {0}/mix.png (data: {1})\n", dir.string(), data.string());
}

}  // namespace

int diagMain(int argc, char** argv) {
    std::string path, plotDir;
    po::options_description options("kiln diag");
    options.add_options()
        ("file", po::value<std::string>(&path)->required(), "a run's diag.h5")
        ("plot", po::value<std::string>(&plotDir), "write loss.png, throughput.png and mix.png into this directory")
        ("json", "print the summary as one JSON object")
        ("losses", "print one line per step: step (from 0), loss and gradient norm, full precision")
        ("eval", "print one line per held-out evaluation: steps trained before it, loss and perplexity, full precision");
    po::positional_options_description positional;
    positional.add("file", 1);
    po::variables_map values;
    if (!parseCommandLine(argc, argv, "kiln diag RUN_DIR/diag.h5 [--plot DIR] [--json] [--losses] [--eval]", options, positional, values)) return 0;

    auto file = io::openDiagForReading(path);
    std::vector<std::size_t> rows;
    const auto steps = latestPerStep(io::DiagFile::readSteps(file), rows);
    std::vector<std::string> sources;
    const auto allMix = io::DiagFile::readSourceTokens(file, sources);
    std::vector<std::vector<std::uint64_t>> mix;
    for (auto r : rows) mix.push_back(r < allMix.size() ? allMix[r] : std::vector<std::uint64_t>(sources.size()));
    const auto events = io::DiagFile::readEvents(file);

    const auto layouts = io::DiagFile::readInstantiations(file);
    const auto failures = io::DiagFile::readFailures(file);
    const auto evals = latestPerStep(io::DiagFile::readEvals(file));
    const bool json = values.count("json") > 0;
    // What each layout measured against what the planner predicted for it:
    // the median step time over the steps it ran (0 when it ran none).
    std::vector<double> measured;
    for (std::size_t i = 0; i < layouts.size(); ++i) {
        const std::uint64_t end = i + 1 < layouts.size() ? layouts[i + 1].step : ~std::uint64_t{0};
        std::vector<double> times;
        for (const auto& r : steps)
            if (r.step >= layouts[i].step && r.step < end) times.push_back(r.stepTime);
        std::sort(times.begin(), times.end());
        measured.push_back(times.empty() ? 0.0 : times[times.size() / 2]);
    }
    if (values.count("losses")) {
        for (const auto& r : steps) fmt::print("{} {:.17g} {:.17g}\n", r.step, r.loss, r.gradNorm);
        return 0;
    }
    if (values.count("eval")) {
        for (const auto& e : evals) fmt::print("{} {:.17g} {:.17g}\n", e.step, e.loss, e.perplexity);
        return 0;
    }
    double time = 0, wait = 0, tokens = 0, forward = 0, backward = 0, sync = 0, optimizer = 0, pipeline = 0;
    for (const auto& r : steps) {
        time += r.stepTime;
        wait += r.dataWait;
        tokens += double(r.tokens);
        forward += r.forward;
        backward += r.backward;
        sync += r.sync;
        optimizer += r.optimizer;
        pipeline += r.pipelineWait;
    }
    std::vector<std::uint64_t> perSource(sources.size());
    for (const auto& row : mix)
        for (std::size_t s = 0; s < sources.size() && s < row.size(); ++s) perSource[s] += row[s];
    if (json) {
        // Everything the text summary shows, for scripts.
        nlohmann::json out;
        out["file"] = path;
        out["steps"] = steps.size();
        if (!steps.empty()) {
            out["first_loss"] = steps.front().loss;
            out["last_loss"] = steps.back().loss;
            out["tokens_per_s"] = tokens / time;
            out["seconds_per_step"] = time / double(steps.size());
            std::vector<double> times;
            for (const auto& r : steps) times.push_back(r.stepTime);
            std::sort(times.begin(), times.end());
            out["median_step_s"] = times[times.size() / 2];
            out["slowest_step_s"] = times.back();
            out["share_data_wait"] = wait / time;
            out["share_forward"] = forward / time;
            out["share_backward"] = backward / time;
            out["share_sync"] = sync / time;
            out["share_optimizer"] = optimizer / time;
            out["share_pipeline_wait"] = pipeline / time;
        }
        out["source_tokens"] = nlohmann::json::object();
        for (std::size_t s = 0; s < sources.size(); ++s) out["source_tokens"][sources[s]] = perSource[s];
        out["instantiations"] = nlohmann::json::array();
        for (std::size_t i = 0; i < layouts.size(); ++i) {
            const auto& l = layouts[i];
            out["instantiations"].push_back({{"step", l.step}, {"time", l.time}, {"pipelines", l.pipelines},
                                             {"nodes_used", l.nodesUsed}, {"nodes_idle", l.nodesIdle},
                                             {"pinned", l.pinned != 0}, {"predicted_step_s", l.predictedStepTime},
                                             {"measured_step_s", measured[i]},
                                             {"layout", l.layout}, {"ranks", l.ranks}, {"tolerance", l.tolerance},
                                             {"spares", l.spares}});
        }
        out["failures"] = nlohmann::json::array();
        for (const auto& f : failures)
            out["failures"].push_back({{"step", f.step}, {"time", f.time}, {"failed_ranks", f.failedRanks},
                                       {"retired_nodes", f.retiredNodes}, {"rounds", f.rounds}, {"detect_s", f.detect},
                                       {"revoke_s", f.revoke}, {"shrink_s", f.shrink}, {"regroup_s", f.regroup},
                                       {"instantiate_s", f.instantiate}, {"migrate_s", f.migrate},
                                       {"rebuild_s", f.rebuild}, {"replay_s", f.replay},
                                       {"bytes_migrated", f.bytesMigrated}, {"layout", f.layout}});
        out["eval"] = nlohmann::json::array();
        for (const auto& e : evals)
            out["eval"].push_back({{"step", e.step}, {"loss", e.loss}, {"perplexity", e.perplexity}, {"tokens", e.tokens},
                                   {"seconds", e.seconds}, {"time", e.time}});
        out["events"] = nlohmann::json::array();
        for (const auto& e : events)
            out["events"].push_back({{"step", e.step}, {"time", e.time}, {"kind", e.kind}, {"detail", e.detail}});
        fmt::print("{}\n", out.dump());
        return 0;
    }
    fmt::print("{}: {} steps recorded\n", path, steps.size());
    if (!steps.empty()) {
        fmt::print("  loss {:.4f} at step {} -> {:.4f} at step {}\n", steps.front().loss, steps.front().step + 1,
                   steps.back().loss, steps.back().step + 1);
        fmt::print("  {:.0f} tokens in {:.1f} s of steps: {:.1f}k tokens/s, {:.1f} ms per step\n", tokens, time,
                   tokens / time / 1e3, 1e3 * time / steps.size());
        fmt::print("  time shares (rank 0): data wait {:.1f}%, forward {:.1f}%, backward {:.1f}%, waiting for other "
                   "stages {:.1f}%, gradient sync {:.1f}%, optimizer {:.1f}%, other {:.1f}%\n",
                   100 * wait / time, 100 * forward / time, 100 * backward / time, 100 * pipeline / time, 100 * sync / time,
                   100 * optimizer / time,
                   100 * (time - wait - forward - backward - pipeline - sync - optimizer) / time);
        for (std::size_t s = 0; s < sources.size(); ++s)
            fmt::print("  source {:<12} {:>12} tokens ({:.1f}%)\n", sources[s], perSource[s], 100.0 * perSource[s] / tokens);
    }
    if (!evals.empty()) {
        const auto best = std::min_element(evals.begin(), evals.end(), [](const auto& a, const auto& b) { return a.loss < b.loss; });
        fmt::print("  held-out loss ({} tokens each; best {:.4f} after step {}):\n", evals.back().tokens, best->loss, best->step);
        for (const auto& e : evals)
            fmt::print("    after step {:>7}  loss {:.4f}  perplexity {:>9.2f}  ({:.2f} s)\n", e.step, e.loss, e.perplexity,
                       e.seconds);
    }
    fmt::print("  layouts (pipelines as nodes:microbatches; start-up ranks of their stages; median step against the "
               "planner's prediction):\n");
    for (std::size_t i = 0; i < layouts.size(); ++i) {
        const auto& l = layouts[i];
        const std::string speed =
            measured[i] > 0 && l.predictedStepTime > 0
                ? fmt::format("  step {:.1f} ms, predicted {:.1f} ms ({:.2f}x)", 1e3 * measured[i], 1e3 * l.predictedStepTime,
                              measured[i] / l.predictedStepTime)
                : std::string();
        fmt::print("    from step {:>7}  {:<16} tolerates {} node failure{} at once{}  ranks {}{}{}\n", l.step, l.layout,
                   l.tolerance, l.tolerance == 1 ? "" : "s",
                   l.spares > 0 ? fmt::format(", {} spare{}", l.spares, l.spares == 1 ? "" : "s") : std::string(), l.ranks,
                   l.pinned ? "  (pinned)" : "", speed);
    }
    if (!failures.empty()) {
        fmt::print("  failures (seconds of each phase of the recovery; start-up ranks and nodes):\n");
        fmt::print("    {:>7} {:>8} {:>6} {:>6} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>10}  {}\n", "step", "ranks",
                   "nodes", "rounds", "detect", "revoke", "shrink", "regroup", "choose", "migrate", "rebuild", "replay",
                   "MB moved", "layout after");
        for (const auto& f : failures)
            fmt::print("    {:>7} {:>8} {:>6} {:>6} {:>8.4f} {:>8.4f} {:>8.4f} {:>8.4f} {:>8.5f} {:>8.4f} {:>8.4f} {:>8.4f} "
                       "{:>10.2f}  {}\n",
                       f.step, f.failedRanks, f.retiredNodes, f.rounds, f.detect, f.revoke, f.shrink, f.regroup,
                       f.instantiate, f.migrate, f.rebuild, f.replay, f.bytesMigrated / 1e6, f.layout);
    }
    fmt::print("  events:\n");
    for (const auto& e : events) fmt::print("    step {:>7}  {:<12} {}\n", e.step, e.kind, e.detail);
    if (!plotDir.empty() && !steps.empty()) plot(plotDir, steps, mix, sources, failures, evals);
    return 0;
}

}  // namespace kiln::apps
