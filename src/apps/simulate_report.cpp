#include "simulate_report.hpp"

#include "kiln/base/error.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

namespace kiln::apps {

double SimulatedChoice::mean() const {
    double sum = 0;
    for (const auto& r : seeds) sum += r.effective();
    return seeds.empty() ? 0.0 : sum / double(seeds.size());
}

double SimulatedChoice::spread() const {
    if (seeds.size() < 2) return 0.0;
    const double m = mean();
    double sum = 0;
    for (const auto& r : seeds) sum += (r.effective() - m) * (r.effective() - m);
    return std::sqrt(sum / double(seeds.size() - 1));
}

namespace {

// The mean over seeds of a quantity of each run.
template <typename F>
double meanOf(const SimulatedChoice& c, F of) {
    double sum = 0;
    for (const auto& r : c.seeds) sum += double(of(r));
    return c.seeds.empty() ? 0.0 : sum / double(c.seeds.size());
}

struct Cause {
    const char* name;
    double sim::LostTime::*field;
};
constexpr Cause kCauses[] = {{"detection", &sim::LostTime::detection},     {"recovery", &sim::LostTime::recovery},
                             {"migration", &sim::LostTime::migration},     {"replay", &sim::LostTime::replay},
                             {"redundancy", &sim::LostTime::redundancy},   {"degraded", &sim::LostTime::degraded},
                             {"checkpoints", &sim::LostTime::checkpoints}, {"admissions", &sim::LostTime::admissions},
                             {"queue", &sim::LostTime::queue},             {"requeues", &sim::LostTime::requeues},
                             {"redone", &sim::LostTime::redone},           {"first_steps", &sim::LostTime::firstSteps}};

}  // namespace

void printSimulateText(const SimulateSummary& s) {
    fmt::print("kiln simulate: {}, {} nodes x {} ranks, {:g} days, {}\n", s.deck, s.nodes, s.ranksPerNode, s.days,
               s.failuresFrom);
    fmt::print("reference (effective time 100 %): {}\n", s.reference);
    if (!s.nodeDown.empty()) fmt::print("a node down: {}\n", s.nodeDown);
    fmt::print("costs (change with --cost NAME=VALUE; --costs-from RUN/diag.h5 takes a measured run's):\n");
    for (const auto& [name, c] : s.costs) {
        const bool bandwidth = c.unit == "B/s";
        fmt::print("  {:<16} {:>10.4g} {:<5} {}\n", name, bandwidth ? c.value / 1e9 : c.value,
                   bandwidth ? "GB/s" : c.unit, c.source);
    }
    fmt::print("\n{:<34} {:>9} {:>6} {:>8} {:>8} {:>8} {:>7} {:>7} {:>8} {:>7}\n", "choice (mean over seeds)", "effective",
               "+-", "failures", "in place", "requeues", "below f", "min tol", "TB moved", "x held");
    for (const auto& c : s.choices) {
        // Bytes moved over what the failed nodes held: 1 when a failure moves the failed node's layers alone.
        const double held = meanOf(c, [](const sim::SimResult& r) { return r.failedHoldingBytes; });
        const double moved = meanOf(c, [](const sim::SimResult& r) { return r.bytesMigrated; });
        fmt::print("{:<34} {:>8.2f}% {:>6.2f} {:>8.1f} {:>8.1f} {:>8.1f} {:>6.1f}% {:>7.0f} {:>8.2f} {:>7}\n", c.label, 100 * c.mean(),
                   100 * c.spread(), meanOf(c, [](const sim::SimResult& r) { return r.failures; }),
                   meanOf(c, [](const sim::SimResult& r) { return r.survivedInPlace; }),
                   meanOf(c, [](const sim::SimResult& r) { return r.requeues; }),
                   100 * meanOf(c, [](const sim::SimResult& r) { return r.belowFSeconds / r.seconds; }),
                   meanOf(c, [](const sim::SimResult& r) { return r.minTolerance; }),
                   moved / 1e12, held > 0 ? fmt::format("{:.2f}", moved / held) : std::string("-"));
        if (c.closedForm >= 0)
            fmt::print("{:<34} {:>8.2f}%  (closed form, Daly: checkpoint every {} steps)\n", "", 100 * c.closedForm,
                       c.checkpointEvery);
    }
    fmt::print("\n{:<34}", "hours lost, by cause");
    for (const auto& cause : kCauses) fmt::print(" {:>11}", cause.name);
    fmt::print("\n");
    for (const auto& c : s.choices) {
        fmt::print("{:<34}", c.label);
        for (const auto& cause : kCauses)
            fmt::print(" {:>11.2f}", meanOf(c, [&](const sim::SimResult& r) { return r.lost.*cause.field; }) / 3600);
        fmt::print("\n");
    }
    const auto& best = s.choices[s.recommended];
    fmt::print("\nrecommended: {} ({}): {:.2f} % effective training time", best.label, best.startLayout, 100 * best.mean());
    if (!s.runnerUp.empty()) {
        if (std::abs(s.margin) < 1e-4)
            fmt::print(", tied with {} (equal to 0.01 points: the higher f, then fewer spares, is preferred)", s.runnerUp);
        else
            fmt::print(", {:.2f} points ahead of {}", 100 * s.margin, s.runnerUp);
    }
    fmt::print("\n");
    printSilentCorruptionText(s.silent);
}

void printSimulateJson(const SimulateSummary& s) {
    nlohmann::json out;
    out["deck"] = s.deck;
    out["nodes"] = s.nodes;
    out["ranks_per_node"] = s.ranksPerNode;
    out["days"] = s.days;
    out["node_mtbf_hours"] = s.nodeMtbfHours;
    out["failures_from"] = s.failuresFrom;
    out["reference"] = s.reference;
    if (!s.nodeDown.empty())
        out["node_down"] = {{"text", s.nodeDown}, {"step_change", s.nodeDownKept}, {"step_change_new_plan", s.nodeDownFull}};
    for (const auto& [name, c] : s.costs) out["costs"][name] = {{"value", c.value}, {"unit", c.unit}, {"source", c.source}};
    out["choices"] = nlohmann::json::array();
    for (const auto& c : s.choices) {
        nlohmann::json row{{"label", c.label},
                           {"policy", sim::nameOf(c.policy)},
                           {"baseline", c.baseline},
                           {"f", c.f},
                           {"spares", c.spares},
                           {"checkpoint_every", c.checkpointEvery},
                           {"start_layout", c.startLayout},
                           {"effective", c.mean()},
                           {"effective_sd", c.spread()}};
        if (c.closedForm >= 0) row["closed_form"] = c.closedForm;
        row["seeds"] = nlohmann::json::array();
        for (const auto& r : c.seeds) {
            nlohmann::json lost;
            for (const auto& cause : kCauses) lost[cause.name] = r.lost.*cause.field;
            row["seeds"].push_back({{"effective", r.effective()},
                                    {"useful_tokens", r.usefulTokens},
                                    {"failures", r.failures},
                                    {"survived_in_place", r.survivedInPlace},
                                    {"requeues", r.requeues},
                                    {"host_requeues", r.hostRequeues},
                                    {"admissions", r.admissions},
                                    {"checkpoints", r.checkpoints},
                                    {"bytes_migrated", r.bytesMigrated},
                                    {"failure_bytes_migrated", r.failureBytesMigrated},
                                    {"failed_holding_bytes", r.failedHoldingBytes},
                                    {"replans", r.replans},
                                    {"below_f_seconds", r.belowFSeconds},
                                    {"min_tolerance", r.minTolerance},
                                    {"lost_seconds", lost},
                                    {"seconds", r.seconds},
                                    {"steps", r.steps}});
            auto& layouts = row["seeds"].back()["layouts"] = nlohmann::json::array();
            for (const auto& l : r.layouts) layouts.push_back({{"time", l.time}, {"layout", l.layout}});
        }
        out["choices"].push_back(row);
    }
    out["recommended"] = s.choices[s.recommended].label;
    out["margin"] = s.margin;
    out["runner_up"] = s.runnerUp;
    if (s.silent.priced()) out["silent_corruption"] = silentCorruptionJson(s.silent);
    fmt::print("{}\n", out.dump());
}

void plotSimulation(const std::string& dir, const SimulateSummary& s, const std::vector<std::size_t>& indices, bool quiet) {
    namespace fs = std::filesystem;
    fs::create_directories(dir);
    std::string plots, tolerance;
    for (std::size_t k = 0; k < indices.size(); ++k) {
        const auto& c = s.choices[indices[k]];
        if (c.seeds.empty()) continue;
        const auto& r = c.seeds.front();
        const fs::path data = fs::path(dir) / fmt::format("timeline-{}.dat", k);
        std::ofstream out(data);
        out << "# days mean_tokens_per_s min_tolerance min_live_nodes (over each of 400 windows)\n";
        // The state holds from one point to the next: averaged over windows, or a month of
        // short recoveries reads as a solid block.
        constexpr int kWindows = 400;
        const double width = r.seconds / kWindows;
        std::size_t at = 0;
        for (int w = 0; w < kWindows; ++w) {
            const double begin = w * width, end = begin + width;
            while (at + 1 < r.timeline.size() && r.timeline[at + 1].time <= begin) ++at;
            double tokens = 0;
            std::uint32_t tolerance = r.timeline[at].tolerance, live = r.timeline[at].liveNodes;
            for (std::size_t i = at; i < r.timeline.size() && r.timeline[i].time < end; ++i) {
                const double from = std::max(begin, r.timeline[i].time);
                const double to = i + 1 < r.timeline.size() ? std::min(end, r.timeline[i + 1].time) : end;
                tokens += r.timeline[i].tokensPerSecond * std::max(0.0, to - from);
                tolerance = std::min(tolerance, r.timeline[i].tolerance);
                live = std::min(live, r.timeline[i].liveNodes);
            }
            out << (begin + width / 2) / 86400 << ' ' << tokens / width << ' ' << tolerance << ' ' << live << "\n";
        }
        plots += fmt::format("{}'{}' using 1:($2/1e6) with lines lw 1 title '{}'", plots.empty() ? "" : ", ",
                             data.string(), c.label);
        tolerance += fmt::format("{}'{}' using 1:3 with lines lw 1 title '{}'", tolerance.empty() ? "" : ", ",
                                 data.string(), c.label);
    }
    const fs::path failures = fs::path(dir) / "failures.dat";
    {
        std::ofstream out(failures);
        if (!indices.empty() && !s.choices[indices[0]].seeds.empty())
            for (double t : s.choices[indices[0]].seeds.front().failureTimes) out << t / 86400 << " 0\n";
    }
    const std::string script = fmt::format(
        "set terminal pngcairo size 1000,700\nset output '{0}/simulation.png'\nset multiplot layout 2,1\nset grid\n"
        "set key bottom right\nset yrange [0:*]\nset title 'throughput over the run (seed 1, mean of each window); failures marked below'\n"
        "set ylabel 'M tokens/s'\nset yrange [0:*]\nplot {1}, '{3}' using 1:2 with points pt 2 lc rgb 'red' title 'failure'\n"
        "set title 'tolerance: simultaneous node failures survived in place (least in each window)'\nset xlabel 'days'\nset ylabel 'nodes'\n"
        "plot {2}\nunset multiplot\n",
        dir, plots, tolerance, failures.string());
    FILE* gnuplot = popen("gnuplot", "w");
    if (!gnuplot) throw Error("cannot start gnuplot (install gnuplot-nox)", ErrorScope::AllRanks);
    std::fputs(script.c_str(), gnuplot);
    if (pclose(gnuplot) != 0) throw Error("gnuplot failed; the plot was not written", ErrorScope::AllRanks);
    if (!quiet) fmt::print("plot: {}/simulation.png\n", dir);
}

}  // namespace kiln::apps
