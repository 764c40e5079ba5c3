// BPE merges (issue 53): the heap kiln uses for long pieces (a SentencePiece-style tokenizer sends whole
// documents) gives exactly what the lowest-rank-leftmost scan gives, on random merge tables and random symbol
// runs with many repeats (where ties between equal pairs decide); and the merge table finds what was put in.
#include "../../src/data/bpe_merges.hpp"

#include <gtest/gtest.h>

#include <random>

using kiln::data::detail::applyMergesByHeap;
using kiln::data::detail::applyMergesByScan;
using kiln::data::detail::mergeKey;
using kiln::data::detail::MergeTable;

TEST(BpeMerges, TableFindsWhatWasPutAndNothingElse) {
    MergeTable table;
    for (std::uint32_t i = 0; i < 5000; ++i) table.emplace(mergeKey(i, i * 7 + 1), {i, 100000 + i});
    EXPECT_EQ(table.size(), 5000u);
    for (std::uint32_t i = 0; i < 5000; ++i) {
        const auto* m = table.find(mergeKey(i, i * 7 + 1));
        ASSERT_NE(m, nullptr);
        EXPECT_EQ(m->rank, i);
        EXPECT_EQ(m->merged, 100000 + i);
        EXPECT_EQ(table.find(mergeKey(i, i * 7 + 2)), nullptr);
    }
    table.emplace(mergeKey(3, 22), {9999, 1});  // a pair listed again: the later one
    EXPECT_EQ(table.find(mergeKey(3, 22))->rank, 9999u);
    EXPECT_EQ(table.size(), 5000u);
}

TEST(BpeMerges, HeapEqualsScanOnRandomPieces) {
    std::mt19937 random(53);
    for (int trial = 0; trial < 200; ++trial) {
        // An alphabet of 6 symbols, merges over them and their products, ranked at random.
        const std::uint32_t alphabet = 6;
        MergeTable table;
        std::uint32_t next = alphabet, rank = 0;
        std::vector<std::uint32_t> symbols(alphabet);
        for (std::uint32_t s = 0; s < alphabet; ++s) symbols[s] = s;
        for (int m = 0; m < 30; ++m) {
            const auto a = symbols[random() % symbols.size()], b = symbols[random() % symbols.size()];
            if (table.find(mergeKey(a, b))) continue;
            table.emplace(mergeKey(a, b), {rank++, next});
            symbols.push_back(next++);
        }
        std::vector<std::uint32_t> piece(10 + random() % 300);
        for (auto& s : piece) s = random() % (trial % 2 ? 2 : alphabet);  // half the trials: long runs of two
        auto byScan = piece, byHeap = piece;
        applyMergesByScan(byScan, table);
        applyMergesByHeap(byHeap, table);
        ASSERT_EQ(byScan, byHeap) << "trial " << trial;
    }
}
