#include "kiln/fault/fault_injector.hpp"

#include "kiln/base/log.hpp"

#include <fmt/format.h>

#include <csignal>
#include <cstdio>
#include <sstream>

namespace kiln::fault {

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
            return fmt::format("'{}' is not RANK:STEP:PHASE (e.g. 3:5:allreduce)", item);
        std::string name = phase;
        if (name.size() > 5 && name.compare(name.size() - 5, 5, ":stop") == 0) {
            injection.hang = true;
            name.resize(name.size() - 5);
        }
        bool known = false;
        for (Phase p : {Phase::Forward, Phase::Backward, Phase::Send, Phase::AllReduce, Phase::Sums, Phase::Commit,
                        Phase::Optimizer, Phase::Checkpoint, Phase::Regroup, Phase::Migrate}) {
            if (name == phaseName(p)) {
                injection.phase = p;
                known = true;
            }
        }
        if (!known) return fmt::format("'{}': phase '{}' is not one of forward, backward, send, allreduce, sums, commit, optimizer, checkpoint, "
                               "regroup, migrate", item, name);
        injection.rank = static_cast<int>(rank);
        injection.step = step;
        out.push_back(injection);
    }
    return "";
}

FaultInjector::FaultInjector(std::vector<Injection> injections, int originalRank) {
    for (const auto& i : injections)
        if (i.rank == originalRank) mine_.push_back(i);
}

void FaultInjector::at(std::uint64_t step, Phase phase) const {
    for (const auto& i : mine_) {
        if (i.step != step || i.phase != phase) continue;
        if (i.hang) {
            log::warn("fault injection: stopping this process (SIGSTOP) at step {} in {}", step, phaseName(phase));
            std::raise(SIGSTOP);
            continue;  // if ever continued
        }
        log::warn("fault injection: killing this process (SIGKILL) at step {} in {}", step, phaseName(phase));
        std::raise(SIGKILL);
    }
}

}  // namespace kiln::fault
