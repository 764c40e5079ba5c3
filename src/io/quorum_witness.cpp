#include "kiln/io/quorum_witness.hpp"

#include "kiln/base/unique_fd.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <system_error>

namespace kiln::io {
namespace {

constexpr const char* kHeader = "kiln-quorum-witness 1";

// The start-up ranks a witness names; empty when it is not one.
std::vector<int> readHolders(const std::filesystem::path& path) {
    std::ifstream in(path);
    std::string header, word, list;
    if (!std::getline(in, header) || header != kHeader || !(in >> word >> list) || word != "ranks") return {};
    std::vector<int> ranks;
    std::stringstream items(list);
    for (std::string item; std::getline(items, item, ',');) {
        try {
            ranks.push_back(std::stoi(item));
        } catch (const std::exception&) {
            return {};
        }
    }
    return ranks;
}

}  // namespace

std::filesystem::path quorumWitnessPath(const std::filesystem::path& dir, std::uint64_t epoch) {
    return dir / fmt::format("quorum-{:08}", epoch);
}

QuorumClaim claimQuorum(const std::filesystem::path& dir, std::uint64_t epoch, const std::vector<int>& side) {
    QuorumClaim claim;
    const auto target = quorumWitnessPath(dir, epoch);
    // Written whole under a name of this process, then linked into place: the witness is never seen half written.
    const auto draft = dir / fmt::format(".quorum-{:08}.{}", epoch, ::getpid());
    const std::string content = fmt::format("{}\nranks {}\n", kHeader, fmt::join(side, ","));
    {
        std::error_code ignored;
        std::filesystem::create_directories(dir, ignored);
        const UniqueFd fd(::open(draft.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644));
        if (fd.get() < 0) {
            claim.problem = fmt::format("cannot create '{}': {}", draft.string(), std::strerror(errno));
            return claim;
        }
        if (::write(fd.get(), content.data(), content.size()) != static_cast<ssize_t>(content.size()) ||
            ::fsync(fd.get()) != 0) {
            claim.problem = fmt::format("cannot write '{}': {}", draft.string(), std::strerror(errno));
            ::unlink(draft.c_str());
            return claim;
        }
    }
    const int linked = ::link(draft.c_str(), target.c_str());
    const int linkError = errno;
    ::unlink(draft.c_str());
    if (linked != 0 && linkError != EEXIST) {
        claim.problem = fmt::format("cannot create '{}': {}", target.string(), std::strerror(linkError));
        return claim;
    }
    // Created now, or found: read back either way (over NFS a link that succeeded may report failure).
    const std::vector<int> holders = readHolders(target);
    if (holders.empty()) {
        claim.problem = fmt::format("'{}' is not a quorum witness kiln wrote", target.string());
        return claim;
    }
    claim.holders = fmt::format("{}", fmt::join(holders, ","));
    claim.held = std::any_of(side.begin(), side.end(), [&](int r) {
        return std::find(holders.begin(), holders.end(), r) != holders.end();
    });
    return claim;
}

bool quorumHeldElsewhere(const std::filesystem::path& dir, std::uint64_t epoch, int rank) {
    const std::vector<int> holders = readHolders(quorumWitnessPath(dir, epoch));
    return !holders.empty() && std::find(holders.begin(), holders.end(), rank) == holders.end();
}

void removeOldWitnesses(const std::filesystem::path& dir, std::uint64_t epoch) {
    std::error_code error;
    for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
        const std::string name = entry.path().filename().string();
        if (name.rfind("quorum-", 0) != 0 || name.size() != 15) continue;
        try {
            if (std::stoull(name.substr(7)) < epoch) std::filesystem::remove(entry.path(), error);
        } catch (const std::exception&) {
        }
    }
}

}  // namespace kiln::io
