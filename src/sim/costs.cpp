#include "kiln/sim/costs.hpp"

#include "kiln/base/error.hpp"
#include "kiln/config/deck.hpp"
#include "kiln/io/diag_summary.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace kiln::sim {

std::vector<std::pair<std::string, Cost*>> SimCosts::named() {
    return {{"detect_ended_s", &detectEnded},     {"detect_hung_s", &detectHung},
            {"recovery_s", &recovery},            {"migration_gb_s", &interBandwidth},
            {"admission_s", &admission},          {"requeue_wait_s", &requeueWait},
            {"startup_s", &startup},              {"read_gb_s", &readBandwidth},
            {"write_gb_s", &writeBandwidth},      {"host_copy_gb_s", &hostCopyBandwidth},
            {"step_scale", &stepScale},           {"repair_s", &repair},
            {"silent_host_s", &silentHost},
            {"first_step_s", &firstStep},       {"check_share", &checkShare},
            {"memory_gb_s", &memoryBandwidth},  {"in_step_share", &inStepShare},
            {"notice_s", &notice}};
}

namespace {

// A measured run's recoveries and steps in place of the defaults.
void measuredFrom(const std::string& path, SimCosts& c) {
    const auto s = io::summarize(io::readDiagRecords(path));
    std::vector<double> detect, recovery;
    for (const auto& f : s.failures) {
        if (std::string(f.layout).rfind("stopped", 0) == 0) continue;
        detect.push_back(f.detect);
        recovery.push_back(f.revoke + f.shrink + f.regroup + f.instantiate + f.rebuild);
    }
    if (!detect.empty()) {
        const auto from = fmt::format("{}: median of its {} recoveries", path, detect.size());
        c.detectEnded = {io::medianOf(detect), "s", from};
        c.recovery = {io::medianOf(recovery), "s", from};
    }
    // A layout's step: the mean of every step run on it, all its spells together (the start's first step
    // apart, priced as first_step_s). The simulation adds steps up, and a median under-counts a run whose
    // steps vary: one layout run early beside idle spares and again later, a few slow steps in each spell.
    const bool firstApart = !s.steps.empty() && s.steps.front().step == 0 && !s.layouts.empty();
    std::map<std::string, std::pair<double, std::size_t>> spent;  // seconds and steps, by layout
    for (std::size_t i = 0; i < s.layouts.size(); ++i) {
        const std::uint64_t end = i + 1 < s.layouts.size() ? s.layouts[i + 1].step : ~std::uint64_t{0};
        auto& [seconds, steps] = spent[s.layouts[i].layout];
        for (const auto& r : s.steps)
            if (r.step >= s.layouts[i].step && r.step < end && !(firstApart && r.step == 0)) {
                seconds += r.stepTime;
                ++steps;
            }
    }
    for (const auto& [layout, sum] : spent)
        if (sum.second > 0) c.measuredStepSeconds[layout] = sum.first / double(sum.second);
    if (firstApart && c.measuredStepSeconds.count(s.layouts[0].layout))
        c.firstStep = {std::max(0.0, s.steps.front().stepTime - c.measuredStepSeconds[s.layouts[0].layout]), "s",
                       fmt::format("{}: its first step over its layout's mean step", path)};
    for (std::size_t i = 0; i < s.layouts.size(); ++i)
        if (s.measuredStepTime[i] > 0 && s.layouts[i].predictedStepTime > 0) {
            c.stepScale = {s.measuredStepTime[i] / s.layouts[i].predictedStepTime, "",
                           fmt::format("{}: median step of its layout {} over the planner's prediction", path,
                                       s.layouts[i].layout)};
            break;
        }
}

}  // namespace

SimCosts costsFor(const config::Deck& deck, const std::string& diagPath, const std::vector<std::string>& overrides) {
    SimCosts c;
    const bool gpu = deck.text("train.device") != "cpu";
    c.detectEnded = {5.0, "s",
                     "assumed: the MPI runtime reports an ended process within seconds (kiln measured 1-10 ms on one "
                     "host: perf/RESULTS.md, bench_redundancy)"};
    c.detectHung = {deck.real("fault.hang_timeout_s"), "s", "the deck's fault.hang_timeout_s (heartbeat silence)"};
    if (deck.real("fault.hang_timeout_s") > 0) {
        // Found from the step's clock (heartbeat.hpp): the process ends, itself or by a process on its host.
        const double fixed = deck.real("fault.step_timeout_s");
        c.hangDeadlineSteps = fixed > 0 ? 0.0 : deck.real("fault.step_deadline");
        c.hangDeadlineFloor = fixed > 0 ? fixed : deck.real("fault.step_deadline_floor_s");
        c.detectHung = {c.detectHungAt(0.0), "s",
                        fixed > 0 ? "the deck's fault.step_timeout_s, then detect_ended_s"
                                  : fmt::format("the step's deadline, max({:g} x the running layout's step, {:g} s) "
                                                "(fault.step_deadline, fault.step_deadline_floor_s), then detect_ended_s; "
                                                "a node whose every process hangs is left to the heartbeat",
                                                c.hangDeadlineSteps, c.hangDeadlineFloor)};
    }
    // Open MPI's detector watches a ring of ranks, each its predecessor; a host's ranks in one block of that ring
    // are found one at a time: the first after a timeout, each next one after two (it is asked to send heartbeats,
    // then given a timeout of slack). Measured on emulated hosts of 2 ranks: 10 s and 30 s at a 10 s timeout.
    c.heartbeatTimeout = deck.real("fault.hang_timeout_s");
    const auto perNode = std::max<std::int64_t>(1, deck.integer("cluster.ranks_per_node"));
    c.silentHost = {c.heartbeatTimeout * double(2 * perNode - 1), "s",
                    fmt::format("fault.hang_timeout_s x (2 x {} ranks per node - 1): the detector's ring finds a "
                                "host's ranks one at a time when they are ranked in a block (the jobscript's order)",
                                perNode)};
    c.recovery = {gpu ? 30.0 : 1.0, "s",
                  gpu ? "assumed: shrink and agreement plus new NCCL communicators at scale (kiln measured 1-8 ms for "
                        "8 CPU ranks)"
                      : "assumed: kiln measured 1-8 ms for 8 CPU ranks on one host (bench_redundancy)"};
    c.interBandwidth = {deck.real("plan.inter_node_gb_s") * 1e9, "B/s", "the deck's plan.inter_node_gb_s"};
    // The new processes start while the job trains (comm/spawn.hpp): the job waits only for their join.
    c.admission = {gpu ? 5.0 : 0.05, "s",
                   gpu ? "assumed: the join at a step boundary (connect and merge over every process at scale, the "
                         "state broadcast; 19-32 ms measured for 1-4 new CPU processes: perf/RESULTS.md, admission); the "
                         "new processes' start-up overlaps training"
                       : "measured: 19-32 ms to join ready CPU processes at a step boundary (perf/bench_admission.sh); "
                         "their start-up overlaps training"};
    c.requeueWait = {600.0, "s", "assumed: back through the queue after a stop beyond f"};
    c.startup = {gpu ? 300.0 : 10.0, "s", "assumed: launch, plan, open the data on the requeued allocation"};
    c.readBandwidth = {1e12, "B/s", "assumed: a parallel filesystem's aggregate read bandwidth"};
    c.writeBandwidth = {1e12, "B/s", "assumed: a parallel filesystem's aggregate write bandwidth"};
    c.hostCopyBandwidth = {gpu ? 25e9 : 10e9, "B/s",
                           gpu ? "assumed: device to host over PCIe" : "assumed: a memory copy on the host"};
    c.stepScale = {1.0, "", "the planner's step times (the deck's profile) as they are"};
    c.repair = {1800.0, "s",
                "assumed: half an hour until the scheduler hands the job a healthy node to admit (the pool that "
                "gives a requeued job its nodes)"};
    c.firstStep = {0.0, "s", "assumed: a start's first step as long as the others (measured with --costs-from)"};
    c.checkShare = {0.01, "",
                     "assumed 1 %: within this machine's spread on the CPU decks (under 2 % on pipelines, "
                     "perf/bench_numerics.sh); each stage reads what it sends once more"};
    c.memoryBandwidth = {gpu ? 2e12 : 20e9, "B/s",
                         gpu ? "assumed: a GPU's memory (H100: 3.35 TB/s at best)" : "assumed: a CPU socket's memory"};
    c.inStepShare = {0.5, "",
                     "assumed (no published split): a corruption of an activation, a gradient or a sum shows in its "
                     "step; one of a weight or a moment only when the copies are compared"};
    c.notice = {86400.0, "s", "assumed: a person notices a loss curve or an evaluation gone wrong within a day"};
    if (!diagPath.empty()) measuredFrom(diagPath, c);
    auto names = c.named();
    for (const auto& item : overrides) {
        const auto eq = item.find('=');
        std::string list;
        for (const auto& [name, cost] : names) list += (list.empty() ? "" : ", ") + name;
        if (eq == std::string::npos)
            throw InputError(fmt::format("--cost {}: expected NAME=VALUE, NAME one of {}", item, list));
        const auto name = item.substr(0, eq);
        const auto it = std::find_if(names.begin(), names.end(), [&](const auto& n) { return n.first == name; });
        if (it == names.end())
            throw InputError(fmt::format("--cost {}: no cost named \"{}\"; the names are {}", item, name, list));
        double value = 0;
        try {
            std::size_t used = 0;
            value = std::stod(item.substr(eq + 1), &used);
            if (used != item.size() - eq - 1 || value < 0) throw std::invalid_argument(item);
        } catch (const std::exception&) {
            throw InputError(fmt::format("--cost {}: \"{}\" is not a number >= 0", item, item.substr(eq + 1)));
        }
        // Bandwidths are given in GB/s, as in the deck. They and the step scale divide: 0 would make a
        // step or a copy take forever (issue 65).
        const bool bandwidth = name.size() > 5 && name.substr(name.size() - 5) == "_gb_s";
        if ((bandwidth || it->second == &c.stepScale) && !(value > 0))
            throw InputError(fmt::format("--cost {}: {} must be > 0 ({}); it divides the time of every {}", item, name,
                                         bandwidth ? "GB/s" : "a factor of the planner's step times",
                                         bandwidth ? "copy it prices" : "step"));
        if (name.size() > 6 && name.substr(name.size() - 6) == "_share" && value > 1)
            throw InputError(fmt::format("--cost {}: {} is a share: expected 0 to 1", item, name));
        if (bandwidth) value *= 1e9;
        *it->second = {value, it->second->unit, "--cost " + item};
        if (it->second == &c.detectHung) c.hangDeadlineSteps = c.hangDeadlineFloor = 0.0;  // as given
    }
    return c;
}

}  // namespace kiln::sim
