#include "kiln/fault/fault_injector.hpp"

#include "kiln/base/log.hpp"

#include <fmt/format.h>

#include <stdexcept>
#include <thread>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <sstream>
#include <utility>

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
    }
    return "?";
}

std::string parseInjections(const std::string& text, std::vector<Injection>& out) {
    std::string spaced = text;
    for (auto& c : spaced)
        if (c == ',') c = ' ';
    std::istringstream in(spaced);
    for (std::string item; in >> item;) {
        Injection injection;
        char phase[32] = {};
        long long rank = -1;
        unsigned long long step = 0;
        if (std::sscanf(item.c_str(), "%lld:%llu:%31s", &rank, &step, phase) != 3 || rank < 0)
            return fmt::format("'{}' is not RANK:STEP:PHASE[:stop|:slow|:throw|:hang] (e.g. 3:5:allreduce)", item);
        std::string name = phase;
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
        for (Phase p : {Phase::Forward, Phase::Backward, Phase::Send, Phase::AllReduce, Phase::Sums, Phase::Commit,
                        Phase::Optimizer, Phase::Checkpoint, Phase::Write, Phase::Publish, Phase::Regroup, Phase::Migrate}) {
            if (name == phaseName(p)) {
                injection.phase = p;
                known = true;
            }
        }
        if (!known) return fmt::format("'{}': phase '{}' is not one of forward, backward, send, allreduce, sums, commit, optimizer, checkpoint, "
                               "write, publish, regroup, migrate", item, name);
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
        if (i.step != step || i.phase != phase || fired_[k]) continue;
        fired_[k] = true;
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

}  // namespace kiln::fault
