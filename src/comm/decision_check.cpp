#include "kiln/comm/decision_check.hpp"

#include "kiln/comm/mpi_check.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>

namespace kiln::comm {
namespace {

std::string rankList(const std::vector<int>& ranks) {
    if (ranks.size() > 8)
        return fmt::format("{} and {} more", fmt::join(ranks.begin(), ranks.begin() + 8, ", "), ranks.size() - 8);
    return fmt::format("{}", fmt::join(ranks, ", "));
}

// The digest most ranks hold (the lowest rank's among equals), and the ranks that hold another.
std::uint64_t mostCommon(const std::vector<std::uint64_t>& digests, std::vector<int>& others) {
    std::map<std::uint64_t, std::size_t> count;
    for (auto d : digests) ++count[d];
    std::uint64_t best = digests.front();
    for (auto d : digests)
        if (count[d] > count[best]) best = d;
    others.clear();
    for (std::size_t r = 0; r < digests.size(); ++r)
        if (digests[r] != best) others.push_back(static_cast<int>(r));
    return best;
}

int named(const std::vector<int>& members, int rank) {
    return members.empty() ? rank : members[static_cast<std::size_t>(rank)];
}

std::vector<int> namedAll(const std::vector<int>& members, const std::vector<int>& ranks) {
    std::vector<int> out;
    for (int r : ranks) out.push_back(named(members, r));
    return out;
}

// Broadcast of a string from `root`.
std::string broadcast(MPI_Comm comm, std::string text, int root) {
    int length = static_cast<int>(text.size());
    KILN_MPI(MPI_Bcast(&length, 1, MPI_INT, root, comm));
    text.resize(static_cast<std::size_t>(length));
    KILN_MPI(MPI_Bcast(text.data(), length, MPI_CHAR, root, comm));
    return text;
}

}  // namespace

std::string disagreementAmong(const std::string& decision, const std::vector<std::uint64_t>& digests,
                              const std::vector<int>& members) {
    if (digests.empty() || std::all_of(digests.begin(), digests.end(), [&](auto d) { return d == digests.front(); }))
        return "";
    std::vector<int> others;
    mostCommon(digests, others);
    std::vector<std::uint64_t> distinct = digests;
    std::sort(distinct.begin(), distinct.end());
    if (std::unique(distinct.begin(), distinct.end()) == distinct.end())
        return fmt::format("ranks disagree on {}: each of the {} ranks computed it differently", decision, digests.size());
    return fmt::format("ranks disagree on {}: rank{} {} computed it differently from the other {} rank{}", decision,
                       others.size() == 1 ? "" : "s", rankList(namedAll(members, others)), digests.size() - others.size(),
                       digests.size() - others.size() == 1 ? "" : "s");
}

void requireAgreement(MPI_Comm comm, const Fingerprint& mine, const std::vector<int>& members) {
    // max(d) and max(~d) = ~min(d): equal everywhere exactly when min = max.
    std::uint64_t words[2] = {mine.digest(), ~mine.digest()};
    KILN_MPI(MPI_Allreduce(MPI_IN_PLACE, words, 2, MPI_UINT64_T, MPI_MAX, comm));
    if (words[0] == ~words[1]) return;

    // Only on a disagreement: who differs, and where.
    int ranks = 0, rank = 0;
    KILN_MPI(MPI_Comm_size(comm, &ranks));
    KILN_MPI(MPI_Comm_rank(comm, &rank));
    std::vector<std::uint64_t> digests(static_cast<std::size_t>(ranks));
    std::uint64_t digest = mine.digest();
    KILN_MPI(MPI_Allgather(&digest, 1, MPI_UINT64_T, digests.data(), 1, MPI_UINT64_T, comm));
    std::vector<int> others;
    const std::uint64_t common = mostCommon(digests, others);
    const int reference = static_cast<int>(std::find(digests.begin(), digests.end(), common) - digests.begin());
    const int odd = others.front();
    // The reference rank's field hashes against every rank's own: the first field any rank differs in.
    std::uint64_t fields = mine.size();
    KILN_MPI(MPI_Bcast(&fields, 1, MPI_UINT64_T, reference, comm));
    std::vector<std::uint64_t> theirs(fields);
    for (std::size_t i = 0; i < fields && i < mine.size(); ++i) theirs[i] = mine.fieldHash(i);
    KILN_MPI(MPI_Bcast(theirs.data(), static_cast<int>(fields), MPI_UINT64_T, reference, comm));
    std::uint64_t first = std::numeric_limits<std::uint64_t>::max();
    for (std::size_t i = 0; i < std::max<std::size_t>(fields, mine.size()); ++i)
        if (i >= fields || i >= mine.size() || theirs[i] != mine.fieldHash(i)) {
            first = i;
            break;
        }
    // The field where the first odd rank differs, named with both values.
    std::uint64_t oddFirst = rank == odd ? first : 0;
    KILN_MPI(MPI_Bcast(&oddFirst, 1, MPI_UINT64_T, odd, comm));
    const auto describe = [&](int who) {
        std::string text;
        if (rank == who)
            text = oddFirst < mine.size() ? mine.name(oddFirst) + " = " + mine.value(oddFirst) : "(no such field)";
        return broadcast(comm, text, who);
    };
    const std::string atReference = describe(reference), atOdd = describe(odd);
    throw DisagreementError(fmt::format(
        "{}\n  first difference: rank {} has {}, rank {} has {}\n  Every rank must compute {} alike; kiln stops "
        "rather than let the ranks wait for each other. This is a bug in kiln or an input that differs between "
        "ranks (a file, the environment): report it with this message.",
        disagreementAmong(mine.decision(), digests, members), named(members, reference), atReference,
        named(members, odd), atOdd, mine.decision()));
}

void splitDigest(std::uint64_t digest, double& high, double& low) {
    high = double(digest >> 32);
    low = double(digest & 0xffffffffull);
}

std::uint64_t joinDigest(double high, double low) {
    return (static_cast<std::uint64_t>(high) << 32) | static_cast<std::uint64_t>(low);
}

}  // namespace kiln::comm
