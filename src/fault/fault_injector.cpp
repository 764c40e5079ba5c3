#include "kiln/fault/fault_injector.hpp"

#include "kiln/base/log.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <stdexcept>
#include <thread>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <sstream>
#include <utility>
#include <vector>

namespace kiln::fault {
namespace {

// Keeps a core busy (as a long forward would) without any MPI call.
void computeWithoutMpi(double seconds) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    volatile double sink = 0;
    while (std::chrono::steady_clock::now() < end)
        for (int i = 0; i < 100000; ++i) sink = sink + 1e-9 * i;
}

}  // namespace

const char* phaseName(Phase phase) {
    switch (phase) {
        case Phase::Forward: return "forward";
        case Phase::Backward: return "backward";
        case Phase::Send: return "send";
        case Phase::AllReduce: return "allreduce";
        case Phase::Sums: return "sums";
        case Phase::Commit: return "commit";
        case Phase::Optimizer: return "optimizer";
        case Phase::Checkpoint: return "checkpoint";
        case Phase::Write: return "write";
        case Phase::Publish: return "publish";
        case Phase::Regroup: return "regroup";
        case Phase::Migrate: return "migrate";
        case Phase::Agree: return "agree";
        case Phase::Received: return "received";
        case Phase::Migrated: return "migrated";
        case Phase::Rebuild: return "rebuild";
        case Phase::Eval: return "eval";
        case Phase::Ready: return "ready";
        case Phase::Rollback: return "rollback";
    }
    return "?";
}

namespace {

// "RANK:STEP[-END]:slow=LAG": false when `item` is not of that form at all,
// else `problem` says what is wrong with it (empty: `out` holds it).
bool numericFault(Injection::Action action) {
    return action == Injection::Action::NanLoss || action == Injection::Action::Corrupt ||
           action == Injection::Action::Poison || action == Injection::Action::Flip ||
           action == Injection::Action::Drift;
}

bool parseLag(const std::string& item, Injection& out, std::string& problem) {
    const auto at = item.find(":slow=");
    if (at == std::string::npos) return false;
    long long rank = -1;
    unsigned long long step = 0, end = ~0ull;
    char tail = 0;
    const std::string head = item.substr(0, at), lag = item.substr(at + 6);
    const bool range = head.find('-') != std::string::npos;
    const int read = range ? std::sscanf(head.c_str(), "%lld:%llu-%llu%c", &rank, &step, &end, &tail)
                           : std::sscanf(head.c_str(), "%lld:%llu%c", &rank, &step, &tail);
    if (read != (range ? 3 : 2) || rank < 0 || end < step) {
        problem = fmt::format("'{}' is not RANK:STEP[-END]:slow=LAG (e.g. 2:5:slow=0.05 or 2:5-20:slow=2x)", item);
        return true;
    }
    double value = 0.0;
    char unit = 0;
    const int parts = std::sscanf(lag.c_str(), "%lf%c%c", &value, &unit, &tail);
    const bool factor = parts == 2 && unit == 'x', seconds = parts == 1 || (parts == 2 && unit == 's');
    if (!(factor || seconds) || value <= 0.0 || (factor && value <= 1.0)) {
        problem = fmt::format("'{}': slow={} is neither seconds per microbatch (0.05, 0.05s) nor a factor above 1 (2x)",
                              item, lag);
        return true;
    }
    out.rank = static_cast<int>(rank);
    out.step = step;
    out.endStep = end;
    out.action = Injection::Action::Lag;
    (factor ? out.lagFactor : out.lagSeconds) = value;
    return true;
}

}  // namespace

std::string parseInjections(const std::string& text, std::vector<Injection>& out) {
    std::string spaced = text;
    for (auto& c : spaced)
        if (c == ',') c = ' ';
    std::istringstream in(spaced);
    for (std::string item; in >> item;) {
        Injection injection;
        std::string problem;
        if (parseLag(item, injection, problem)) {
            if (!problem.empty()) return problem;
            out.push_back(injection);
            continue;
        }
        char phase[32] = {};
        long long rank = -1;
        unsigned long long step = 0;
        if (std::sscanf(item.c_str(), "%lld:%llu:%31s", &rank, &step, phase) != 3 || rank < 0)
            return fmt::format("'{}' is not RANK:STEP:PHASE[:stop|:slow|:throw|:hang] (e.g. 3:5:allreduce) nor "
                               "RANK:STEP:nan|corrupt|poison|flip|drift",
                               item);
        std::string name = phase;
        // A numeric fault names no phase: it strikes where its numbers are made.
        bool numeric = false;
        for (const auto& [kind, action] : {std::pair<std::string, Injection::Action>{"nan", Injection::Action::NanLoss},
                                           {"corrupt", Injection::Action::Corrupt},
                                           {"poison", Injection::Action::Poison},
                                           {"flip", Injection::Action::Flip},
                                           {"drift", Injection::Action::Drift}})
            if (name == kind) {
                injection.action = action;
                numeric = true;
            }
        if (numeric) {
            injection.rank = static_cast<int>(rank);
            injection.step = step;
            out.push_back(injection);
            continue;
        }
        for (const auto& [suffix, action] : {std::pair<std::string, Injection::Action>{":stop", Injection::Action::Stop},
                                             {":slow", Injection::Action::Slow},
                                             {":throw", Injection::Action::Throw},
                                             {":hang", Injection::Action::Hang}}) {
            if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
                injection.action = action;
                name.resize(name.size() - suffix.size());
            }
        }
        bool known = false;
        std::vector<std::string> names;
        for (int k = 0; k <= static_cast<int>(Phase::Rollback); ++k) {
            const auto p = static_cast<Phase>(k);
            names.emplace_back(phaseName(p));
            if (name == phaseName(p)) {
                injection.phase = p;
                known = true;
            }
        }
        if (!known)
            return fmt::format("'{}': phase '{}' is not one of {}", item, name, fmt::join(names, ", "));
        injection.rank = static_cast<int>(rank);
        injection.step = step;
        out.push_back(injection);
    }
    return "";
}

FaultInjector::FaultInjector(std::vector<Injection> injections, int originalRank) {
    for (const auto& i : injections)
        if (i.rank == originalRank) mine_.push_back(i);
    fired_.assign(mine_.size(), false);
}

void FaultInjector::at(std::uint64_t step, Phase phase) {
    for (std::size_t k = 0; k < mine_.size(); ++k) {
        const auto& i = mine_[k];
        if (i.step != step || i.phase != phase || i.action == Injection::Action::Lag || numericFault(i.action)) continue;
        {
            // The training thread and the checkpoint writer's thread both ask (phases write, publish).
            const std::lock_guard<std::mutex> lock(firedMutex_);
            if (fired_[k]) continue;
            fired_[k] = true;
        }
        if (i.action == Injection::Action::Stop) {
            log::warn("fault injection: stopping this process (SIGSTOP) at step {} in {}", step, phaseName(phase));
            std::raise(SIGSTOP);
            continue;  // if ever continued
        }
        if (i.action == Injection::Action::Slow) {
            log::warn("fault injection: computing for {:.0f} s without MPI at step {} in {}", kSlowInjectionSeconds, step,
                      phaseName(phase));
            computeWithoutMpi(kSlowInjectionSeconds);
            continue;
        }
        if (i.action == Injection::Action::Throw)
            throw std::runtime_error(fmt::format("fault injection: an exception from outside kiln at step {} in {}", step,
                                                 phaseName(phase)));
        if (i.action == Injection::Action::Hang) {
            log::warn("fault injection: this thread sleeps forever, outside MPI, at step {} in {}", step, phaseName(phase));
            for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
        }
        log::warn("fault injection: killing this process (SIGKILL) at step {} in {}", step, phaseName(phase));
        std::raise(SIGKILL);
    }
}

bool FaultInjector::strikes(std::uint64_t step, Injection::Action kind) {
    for (std::size_t k = 0; k < mine_.size(); ++k) {
        const auto& i = mine_[k];
        if (i.step != step || i.action != kind) continue;
        if (kind == Injection::Action::Poison) return true;
        const std::lock_guard<std::mutex> lock(firedMutex_);
        if (fired_[k]) continue;
        fired_[k] = true;
        return true;
    }
    return false;
}

double FaultInjector::lag(std::uint64_t step, Phase phase, double computed) const {
    double seconds = 0.0;
    for (const auto& i : mine_) {
        if (i.action != Injection::Action::Lag || step < i.step || step > i.endStep) continue;
        if (i.lagFactor > 0.0) seconds += (i.lagFactor - 1.0) * computed;
        if (phase == Phase::Forward) seconds += i.lagSeconds;
    }
    return seconds;
}

bool FaultInjector::slows(std::uint64_t step) const {
    for (const auto& i : mine_)
        if (i.action == Injection::Action::Lag && step >= i.step && step <= i.endStep) return true;
    return false;
}

void FaultInjector::straggle(std::uint64_t step, Phase phase, double computed) const {
    // Asleep, not busy: a slow device keeps the host's cores free.
    if (const double seconds = lag(step, phase, computed); seconds > 0.0)
        std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
}

}  // namespace kiln::fault
