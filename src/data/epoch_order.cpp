#include "kiln/data/epoch_order.hpp"

#include "kiln/base/hash.hpp"
#include "kiln/data/keyed_permutation.hpp"

#include <stdexcept>

namespace kiln::data {
namespace {

constexpr std::uint64_t kBlocksSalt = 0x626c6f636b73ull;  // "blocks"
constexpr std::uint64_t kWindowSalt = 0x77696e646f77ull;  // "window"

}  // namespace

std::uint64_t epochKey(std::uint64_t seed, const char* source, std::uint64_t epoch) {
    std::uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a of the source name
    for (const char* c = source; *c; ++c) h = (h ^ static_cast<unsigned char>(*c)) * 0x100000001b3ull;
    return base::mix64(base::mix64(seed) ^ base::mix64(h) ^ base::mix64(epoch + 0x65706f6368ull));
}

EpochOrder::EpochOrder(std::uint64_t numDocs, std::uint64_t blockDocs, std::uint64_t windowBlocks, std::uint64_t key)
    : numDocs_(numDocs), blockDocs_(blockDocs), windowBlocks_(windowBlocks), key_(key) {
    if (numDocs == 0 || blockDocs == 0 || windowBlocks == 0) throw std::invalid_argument("EpochOrder: empty");
    numBlocks_ = (numDocs + blockDocs - 1) / blockDocs;
    lastBlockSize_ = numDocs - (numBlocks_ - 1) * blockDocs;
    deficit_ = blockDocs - lastBlockSize_;
    numGroups_ = (numBlocks_ + windowBlocks - 1) / windowBlocks;
    partialSlot_ = KeyedPermutation(numBlocks_, key_ ^ kBlocksSalt).inverse(numBlocks_ - 1);
}

std::uint64_t EpochOrder::blocksIn(std::uint64_t g) const {
    return std::min(windowBlocks_, numBlocks_ - g * windowBlocks_);
}

std::uint64_t EpochOrder::groupStart(std::uint64_t g) const {
    return g * windowBlocks_ * blockDocs_ - (partialSlot_ < g * windowBlocks_ ? deficit_ : 0);
}

std::uint64_t EpochOrder::groupSize(std::uint64_t g) const {
    const bool holdsPartial = partialSlot_ / windowBlocks_ == g;
    return blocksIn(g) * blockDocs_ - (holdsPartial ? deficit_ : 0);
}

std::uint64_t EpochOrder::docAt(std::uint64_t p) const {
    if (p >= numDocs_) throw std::out_of_range("EpochOrder::docAt past the end of the epoch");
    // Groups are full-sized but for one short block, so the estimate is off by at most one.
    std::uint64_t g = p / (windowBlocks_ * blockDocs_);
    if (g + 1 < numGroups_ && groupStart(g + 1) <= p) ++g;
    const std::uint64_t v = KeyedPermutation(groupSize(g), key_ ^ base::mix64(kWindowSalt + g))(p - groupStart(g));

    // The group's documents are its blocks laid out in slot order; one of them may be short.
    std::uint64_t slot, k;
    const bool holdsPartial = partialSlot_ / windowBlocks_ == g;
    const std::uint64_t jp = partialSlot_ - g * windowBlocks_;
    if (!holdsPartial || v < jp * blockDocs_) {
        slot = v / blockDocs_;
        k = v % blockDocs_;
    } else if (v < jp * blockDocs_ + lastBlockSize_) {
        slot = jp;
        k = v - jp * blockDocs_;
    } else {
        const std::uint64_t rest = v - jp * blockDocs_ - lastBlockSize_;
        slot = jp + 1 + rest / blockDocs_;
        k = rest % blockDocs_;
    }
    const std::uint64_t block = KeyedPermutation(numBlocks_, key_ ^ kBlocksSalt)(g * windowBlocks_ + slot);
    return block * blockDocs_ + k;
}

}  // namespace kiln::data
