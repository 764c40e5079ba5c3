#include "bpe_merges.hpp"

#include <functional>
#include <limits>
#include <queue>

namespace kiln::data::detail {

void MergeTable::emplace(std::uint64_t key, Merge merge) {
    if (2 * (size_ + 1) > slots_.size()) grow();
    for (std::size_t i = slot(key);; i = (i + 1) & mask_) {
        Slot& s = slots_[i];
        if (s.used && s.key != key) continue;
        if (!s.used) ++size_;
        s = {key, merge, true};  // a pair listed twice: the later one wins, as in tokenizers' merge map
        return;
    }
}

void MergeTable::grow() {
    std::vector<Slot> old = std::move(slots_);
    const std::size_t capacity = old.empty() ? 64 : 2 * old.size();
    slots_.assign(capacity, Slot{});
    mask_ = capacity - 1;
    shift_ = 64;
    for (std::size_t c = capacity; c > 1; c >>= 1) --shift_;
    size_ = 0;
    for (const auto& s : old)
        if (s.used) emplace(s.key, s.merge);
}

namespace {

constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();

void mergeShort(std::vector<std::uint32_t>& ids, const MergeTable& merges) {
    // Each adjacent pair's merge (rank, merged id), recomputed only beside a merge.
    std::vector<std::pair<std::uint32_t, std::uint32_t>> pairs(ids.size() > 0 ? ids.size() - 1 : 0);
    const auto look = [&](std::size_t k) {
        const auto* m = merges.find(mergeKey(ids[k], ids[k + 1]));
        pairs[k] = m ? std::make_pair(m->rank, m->merged) : std::make_pair(kNone, 0u);
    };
    for (std::size_t k = 0; k < pairs.size(); ++k) look(k);
    while (!pairs.empty()) {
        std::size_t at = 0;
        for (std::size_t k = 1; k < pairs.size(); ++k)
            if (pairs[k].first < pairs[at].first) at = k;  // the lowest rank, leftmost
        if (pairs[at].first == kNone) break;
        ids[at] = pairs[at].second;
        ids.erase(ids.begin() + static_cast<std::ptrdiff_t>(at) + 1);
        pairs.erase(pairs.begin() + static_cast<std::ptrdiff_t>(at));
        if (at > 0) look(at - 1);
        if (at < pairs.size()) look(at);
    }
}

void mergeLong(std::vector<std::uint32_t>& ids, const MergeTable& merges) {
    const std::size_t n = ids.size();
    std::vector<std::size_t> prev(n), next(n);
    // A symbol's version: raised when it changes (merged into, or merged away), so that a heap entry made before
    // is known stale without another lookup.
    std::vector<std::uint32_t> version(n, 0);
    for (std::size_t i = 0; i < n; ++i) {
        prev[i] = i == 0 ? n : i - 1;
        next[i] = i + 1;  // n: none
    }
    // Ordered by rank, then by the left symbol's position: positions never move, so the leftmost of equal ranks
    // comes first, as in the short scan.
    struct Entry {
        std::uint32_t rank, merged;
        std::size_t left, right;
        std::uint32_t leftVersion, rightVersion;
        bool operator>(const Entry& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
    };
    std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap;
    const auto push = [&](std::size_t left) {
        if (left >= n || next[left] >= n) return;
        const std::size_t right = next[left];
        if (const auto* m = merges.find(mergeKey(ids[left], ids[right])))
            heap.push({m->rank, m->merged, left, right, version[left], version[right]});
    };
    for (std::size_t i = 0; i + 1 < n; ++i) push(i);
    constexpr std::uint32_t kGone = std::numeric_limits<std::uint32_t>::max();
    while (!heap.empty()) {
        const Entry e = heap.top();
        heap.pop();
        if (version[e.left] != e.leftVersion || version[e.right] != e.rightVersion) continue;
        ids[e.left] = e.merged;
        ++version[e.left];
        version[e.right] = kGone;
        next[e.left] = next[e.right];
        if (next[e.right] < n) prev[next[e.right]] = e.left;
        if (prev[e.left] < n) push(prev[e.left]);
        push(e.left);
    }
    std::size_t kept = 0;
    for (std::size_t i = 0; i < n; ++i)
        if (version[i] != kGone) ids[kept++] = ids[i];
    ids.resize(kept);
}

}  // namespace

void applyMergesByScan(std::vector<std::uint32_t>& ids, const MergeTable& merges) { mergeShort(ids, merges); }
void applyMergesByHeap(std::vector<std::uint32_t>& ids, const MergeTable& merges) { mergeLong(ids, merges); }

void applyMerges(std::vector<std::uint32_t>& ids, const MergeTable& merges) {
    if (ids.size() < 64)
        mergeShort(ids, merges);
    else
        mergeLong(ids, merges);
}

}  // namespace kiln::data::detail
