// Byte-pair merges applied to one piece's symbols as Hugging Face `tokenizers` applies them: the pair of lowest
// rank first, the leftmost of equal ones, until no adjacent pair has a merge. Internal to the data module.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace kiln::data::detail {

inline std::uint64_t mergeKey(std::uint32_t left, std::uint32_t right) { return (std::uint64_t{left} << 32) | right; }

// (left id << 32 | right id) -> (merge rank, merged id): open addressing over a power-of-two table at most half
// full, a multiplicative hash. Every symbol pair of every piece is looked up here; std::unordered_map's modulo
// and node chasing made these lookups a third of a SentencePiece-style tokenizer's time.
class MergeTable {
public:
    struct Merge {
        std::uint32_t rank, merged;
    };
    void emplace(std::uint64_t key, Merge merge);
    // Null when the pair has no merge.
    const Merge* find(std::uint64_t key) const {
        if (slots_.empty()) return nullptr;
        for (std::size_t i = slot(key);; i = (i + 1) & mask_) {
            const Slot& s = slots_[i];
            if (s.key == key && s.used) return &s.merge;
            if (!s.used) return nullptr;
        }
    }
    std::size_t size() const { return size_; }

private:
    struct Slot {
        std::uint64_t key = 0;
        Merge merge{};
        bool used = false;
    };
    std::size_t slot(std::uint64_t key) const { return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_); }
    void grow();
    std::vector<Slot> slots_;
    std::size_t size_ = 0, mask_ = 0;
    int shift_ = 64;
};

// `ids` merged in place. A short piece (a word) is scanned for its lowest pair after each merge; a long one (a
// SentencePiece-style tokenizer sends whole documents) goes through a heap: n log n, not n squared.
void applyMerges(std::vector<std::uint32_t>& ids, const MergeTable& merges);
// The two ways, for the test that holds them equal (test_bpe_merges).
void applyMergesByScan(std::vector<std::uint32_t>& ids, const MergeTable& merges);
void applyMergesByHeap(std::vector<std::uint32_t>& ids, const MergeTable& merges);

}  // namespace kiln::data::detail
