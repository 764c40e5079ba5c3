#include "kiln/plan/migration.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <numeric>
#include <set>

namespace kiln::plan {

LayersLostError::LayersLostError(std::vector<std::uint32_t> layers)
    : Error(fmt::format("layers {} have no surviving holder", fmt::join(layers, ", ")), ErrorScope::AllRanks),
      layers_(std::move(layers)) {}

std::vector<std::vector<int>> holdersOfLayers(const Layout& layout, const std::vector<int>& members) {
    std::vector<std::vector<int>> holders(layout.layers);
    for (const auto& segment : layout.segments)
        for (std::uint32_t l = segment.firstLayer; l < segment.endLayer; ++l)
            for (int rank : segment.holders) holders[l].push_back(members[static_cast<std::size_t>(rank)]);
    return holders;
}

std::vector<std::vector<std::vector<int>>> holdersOfAtoms(const Layout& layout, const std::vector<int>& members,
                                                          std::uint32_t atoms) {
    std::vector<std::vector<std::vector<int>>> holders(layout.layers, std::vector<std::vector<int>>(atoms));
    for (const auto& segment : layout.segments)
        for (std::uint32_t l = segment.firstLayer; l < segment.endLayer; ++l)
            for (std::uint32_t a = 0; a < atoms; ++a)
                for (int rank : segment.holdersOfAtom(a, atoms))
                    holders[l][a].push_back(members[static_cast<std::size_t>(rank)]);
    return holders;
}

namespace {

int rankIn(const std::vector<int>& members, int startup) {
    const auto it = std::find(members.begin(), members.end(), startup);
    return it == members.end() ? -1 : static_cast<int>(it - members.begin());
}

}  // namespace

std::vector<std::uint32_t> layersWithoutLiveHolder(const Layout& layout, const std::vector<int>& layoutMembers,
                                                   const std::vector<int>& members) {
    // Live members marked by id: a job of 16 k ranks asks 10^5 of them.
    const int largest = members.empty() ? -1 : *std::max_element(members.begin(), members.end());
    std::vector<char> live(static_cast<std::size_t>(largest + 1), 0);
    for (int m : members)
        if (m >= 0) live[static_cast<std::size_t>(m)] = 1;
    const auto alive = [&](int rank) {
        const int m = layoutMembers[static_cast<std::size_t>(rank)];
        return m >= 0 && m <= largest && live[static_cast<std::size_t>(m)] != 0;
    };
    // By atom, as planMigration counts them: a live rank of a split stage holds its own shard only, so a layer
    // whose other shards died with every copy is lost although a rank that held part of it lives (issue 50).
    const std::uint32_t atoms = layout.atoms();
    std::set<std::uint32_t> lost;
    for (const auto& segment : layout.segments)
        for (std::uint32_t a = 0; a < atoms; ++a) {
            if (!segment.anyHolderOfAtom(a, atoms, alive)) {
                for (std::uint32_t l = segment.firstLayer; l < segment.endLayer; ++l) lost.insert(l);
                break;
            }
        }
    return {lost.begin(), lost.end()};
}

std::vector<std::vector<int>> checkpointWriters(const Layout& layout, const std::vector<int>& layoutMembers,
                                                const std::vector<int>& members) {
    std::vector<std::vector<int>> out(layout.layers);
    // A holder's index in `members`, or -1 when it is not a live member.
    const auto live = [&](int rank) { return rankIn(members, layoutMembers[static_cast<std::size_t>(rank)]); };
    for (const auto& segment : layout.segments) {
        std::vector<int> chosen;
        std::set<std::uint32_t> widths(segment.widths.begin(), segment.widths.end());
        for (std::uint32_t width : widths) {
            // Slot by slot, the first stage of this width whose rank of that slot lives: a whole live stage
            // comes out as itself.
            std::vector<int> slots(width, -1);
            std::size_t first = 0;
            for (std::uint32_t w : segment.widths) {
                if (w == width)
                    for (std::uint32_t k = 0; k < w; ++k)
                        if (slots[k] < 0) slots[k] = live(segment.holders[first + k]);
                first += w;
            }
            if (std::find(slots.begin(), slots.end(), -1) == slots.end()) {
                chosen = slots;
                break;
            }
        }
        for (std::uint32_t l = segment.firstLayer; l < segment.endLayer; ++l) out[l] = chosen;
    }
    return out;
}

bool keepsLayer(const Layout& before, const std::vector<int>& oldMembers, const Layout& after,
                const std::vector<int>& members, int rank, std::uint32_t layer) {
    const int old = rankIn(oldMembers, members[static_cast<std::size_t>(rank)]);
    if (old < 0) return false;
    const auto oldRole = before.role(old);
    const auto newRole = after.role(rank);
    return !oldRole.idle() && layer >= oldRole.firstLayer && layer < oldRole.endLayer && oldRole.slot == newRole.slot &&
           oldRole.width == newRole.width;
}

MigrationPlan planMigration(const Layout& before, const std::vector<int>& oldMembers, const Layout& after,
                            const std::vector<int>& members) {
    MigrationPlan plan;
    plan.atoms = std::lcm(before.atoms(), after.atoms());
    const auto oldHolders = holdersOfAtoms(before, oldMembers, plan.atoms);
    const auto newHolders = holdersOfAtoms(after, members, plan.atoms);
    for (std::uint32_t l = 0; l < after.layers; ++l)
        for (std::uint32_t a = 0; a < plan.atoms; ++a) {
            std::vector<int> alive;
            for (int startup : oldHolders[l][a])
                if (const int r = rankIn(members, startup); r >= 0) alive.push_back(r);
            if (alive.empty()) continue;  // lost: layersWithoutLiveHolder says which
            for (int startup : newHolders[l][a]) {
                const int to = rankIn(members, startup);
                if (keepsLayer(before, oldMembers, after, members, to, l)) continue;
                const bool own = std::find(alive.begin(), alive.end(), to) != alive.end();
                plan.transfers.push_back({l, a, own ? to : alive[(l + a) % alive.size()], to});
            }
        }
    plan.lost = layersWithoutLiveHolder(before, oldMembers, members);
    return plan;
}

}  // namespace kiln::plan
