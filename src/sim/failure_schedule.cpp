#include "kiln/sim/failure_schedule.hpp"

#include "kiln/base/error.hpp"
#include "kiln/io/diag_summary.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <random>
#include <sstream>

namespace kiln::sim {

std::vector<FailureEvent> drawFailures(const FailureModel& model, std::uint64_t seed) {
    std::vector<FailureEvent> events;
    if (model.nodes == 0 || model.nodeMtbfHours <= 0.0) return events;
    std::mt19937_64 rng(seed);
    // Whether a failure takes its host comes from a stream of its own: every --host-share meets the same
    // failures at the same times, so that choices compared across it differ only by how failures are handled.
    std::mt19937_64 hosts(seed ^ 0x686f737473ull);
    std::exponential_distribution<double> gap(double(model.nodes) / (3600.0 * model.nodeMtbfHours));
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    std::uniform_int_distribution<std::uint32_t> node(0, model.nodes - 1);
    const std::uint32_t group = std::max<std::uint32_t>(1, std::min(model.groupNodes, model.nodes));
    for (double t = gap(rng); t < model.seconds; t += gap(rng)) {
        FailureEvent e;
        e.time = t;
        const std::uint32_t first = node(rng);
        if (group > 1 && unit(rng) < model.groupShare) {
            const std::uint32_t start = first / group * group;
            for (std::uint32_t n = start; n < std::min(model.nodes, start + group); ++n) e.nodes.push_back(n);
        } else {
            e.nodes.push_back(first);
        }
        e.hang = unit(rng) < model.hangShare;
        e.host = unit(hosts) < model.hostShare;
        events.push_back(std::move(e));
    }
    return events;
}

std::vector<FailureEvent> readFailureTrace(const std::string& path, std::uint32_t nodes) {
    std::ifstream in(path);
    if (!in) throw InputError(fmt::format("{}: cannot open the failure trace", path));
    std::vector<FailureEvent> events;
    std::string line;
    for (int number = 1; std::getline(in, line); ++number) {
        if (const auto hash = line.find('#'); hash != std::string::npos) line.erase(hash);
        std::istringstream words(line);
        std::string time, list, kind;
        if (!(words >> time)) continue;
        const auto where = fmt::format("{}:{}", path, number);
        const auto expected = "expected \"SECONDS NODE[,NODE...] [hang] [host]\"";
        if (!(words >> list)) throw InputError(fmt::format("{}: no node ids; {}", where, expected));
        FailureEvent e;
        try {
            std::size_t used = 0;
            e.time = std::stod(time, &used);
            if (used != time.size() || e.time < 0) throw std::invalid_argument(time);
        } catch (const std::exception&) {
            throw InputError(fmt::format("{}: \"{}\" is not a time in seconds (>= 0); {}", where, time, expected));
        }
        std::istringstream ids(list);
        for (std::string id; std::getline(ids, id, ',');) {
            std::size_t used = 0;
            long value = -1;
            try {
                value = std::stol(id, &used);
            } catch (const std::exception&) {
                used = 0;
            }
            if (used == 0 || used != id.size() || value < 0 || value >= long(nodes))
                throw InputError(fmt::format("{}: \"{}\" is not a node id of the {} simulated nodes (0 to {}); {}", where,
                                             id, nodes, nodes - 1, expected));
            e.nodes.push_back(static_cast<std::uint32_t>(value));
        }
        while (words >> kind) {
            if (kind == "hang" && !e.hang) {
                e.hang = true;
            } else if (kind == "host" && !e.host) {
                e.host = true;
            } else {
                throw InputError(fmt::format("{}: \"{}\" after the nodes; {}", where, kind, expected));
            }
        }
        events.push_back(std::move(e));
    }
    std::stable_sort(events.begin(), events.end(), [](const auto& a, const auto& b) { return a.time < b.time; });
    return events;
}

std::vector<FailureEvent> traceFromDiag(const std::string& path, std::uint32_t nodes) {
    const auto s = io::summarize(io::readDiagRecords(path));
    if (s.layouts.empty()) throw InputError(fmt::format("{}: no layout recorded: not a run's diagnostics", path));
    const double start = s.layouts.front().time;
    std::vector<FailureEvent> events;
    for (const auto& f : s.failures) {
        FailureEvent e;
        e.time = std::max(0.0, f.time - start);
        std::istringstream ids(f.retiredNodes);
        for (std::string id; std::getline(ids, id, ',');) {
            if (id.empty()) continue;
            const long node = std::strtol(id.c_str(), nullptr, 10);
            if (node < 0 || node >= long(nodes))
                throw InputError(fmt::format("{}: a failure at step {} retired node {}, not one of the {} simulated", path,
                                             f.step, id, nodes));
            e.nodes.push_back(static_cast<std::uint32_t>(node));
        }
        // How the run met it: a launch that ended without kiln (a host lost whole), or the step's deadline
        // ending the job (a host gone silent); both a requeue.
        const std::string cause = f.cause;
        e.host = cause == "launch" || cause == "deadline";
        e.hang = cause == "deadline";
        if (!e.nodes.empty()) events.push_back(std::move(e));
    }
    return events;
}

}  // namespace kiln::sim
