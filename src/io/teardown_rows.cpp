#include "kiln/io/teardown_rows.hpp"

#include <set>
#include <sstream>

namespace kiln::io {
namespace {

std::set<std::string> hostSet(const std::string& text) {
    std::set<std::string> hosts;
    std::istringstream names(text);
    for (std::string name; std::getline(names, name, ',');)
        if (!name.empty()) hosts.insert(name);
    return hosts;
}

std::string joined(const std::set<std::string>& hosts) {
    std::string text;
    for (const auto& h : hosts) text += (text.empty() ? "" : ",") + h;
    return text;
}

}  // namespace

std::string lostHostsOf(const std::string& named, const std::vector<std::string>& lostAttemptHosts,
                        const std::vector<std::string>& currentHosts) {
    const std::set<std::string> current(currentHosts.begin(), currentHosts.end());
    std::set<std::string> gone;
    for (const auto& h : hostSet(named))
        if (!current.count(h)) gone.insert(h);
    if (gone.empty())
        for (const auto& h : lostAttemptHosts)
            if (!current.count(h)) gone.insert(h);
    return gone.empty() ? named : joined(gone);
}

std::vector<std::size_t> retiredNodeIds(const std::string& text) {
    std::vector<std::size_t> ids;
    std::istringstream in(text);
    for (std::string item; std::getline(in, item, ',');) {
        if (item.empty() || item.find_first_not_of("0123456789") != std::string::npos) return {};
        ids.push_back(static_cast<std::size_t>(std::stoull(item)));
    }
    return ids;
}

std::vector<std::size_t> teardownCasualties(const std::vector<FailureRecord>& rows, double since,
                                            const std::vector<std::string>& nodeHosts, const std::string& lostHosts) {
    std::vector<std::size_t> casualties;
    const std::set<std::string> lost = hostSet(lostHosts);
    if (lost.empty()) return casualties;
    bool hostLost = false;
    for (std::size_t i = 0; i < rows.size(); ++i) {
        if (rows[i].time < since) continue;
        const auto nodes = retiredNodeIds(rows[i].retiredNodes);
        bool onLost = false, allKnown = !nodes.empty();
        for (auto n : nodes) {
            if (n >= nodeHosts.size()) {
                allKnown = false;
                continue;
            }
            if (lost.count(nodeHosts[n])) onLost = true;
        }
        if (onLost) {
            hostLost = true;
            continue;
        }
        if (hostLost && allKnown && std::string(rows[i].cause) == "process") casualties.push_back(i);
    }
    return casualties;
}

}  // namespace kiln::io
