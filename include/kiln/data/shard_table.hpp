// The shards of one source as columns: where each shard's documents start in
// the source, its token count and its two checksums. 24 bytes a shard, so a
// 100 T-token source of 1.5 M shards costs a rank 36 MB (24 MB once a loader
// has dropped the checksums after its start-up check), where the same list
// parsed from JSON took about a kilobyte a shard.
#pragma once

#include "kiln/data/shard_writer.hpp"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kiln::data {

// The file name kiln prep gives shard `index` of a source.
std::string shardFileName(std::size_t index);

class ShardTable {
public:
    std::size_t size() const { return docStart_.size() - 1; }
    bool empty() const { return size() == 0; }

    void push_back(const ShardSummary& shard);
    // Frees the two checksum columns (8 bytes a shard): a loader needs them
    // only for the shard checks at start-up. Afterwards the checksums and
    // operator[] throw std::logic_error.
    void dropChecksums();
    bool hasChecksums() const { return !checksumsDropped_; }
    // Replaces one shard's entry (tests make inconsistent sources with it).
    void set(std::size_t index, const ShardSummary& shard);
    ShardSummary operator[](std::size_t index) const;

    std::uint64_t numDocs(std::size_t index) const { return docStart_[index + 1] - docStart_[index]; }
    std::uint64_t numTokens(std::size_t index) const { return tokenStart_[index + 1] - tokenStart_[index]; }
    std::uint32_t tokensCrc(std::size_t index) const { return checksums().first[index]; }
    std::uint32_t offsetsCrc(std::size_t index) const { return checksums().second[index]; }
    std::string file(std::size_t index) const;
    // Whether every shard has prep's name (shardFileName): no names are stored then.
    bool namesImplied() const { return names_.empty(); }

    // The source's first document of each shard, with the total last (size() + 1 values).
    const std::vector<std::uint64_t>& docStarts() const { return docStart_; }
    const std::vector<std::uint64_t>& tokenStarts() const { return tokenStart_; }
    const std::vector<std::uint32_t>& tokensCrcs() const { return checksums().first; }
    const std::vector<std::uint32_t>& offsetsCrcs() const { return checksums().second; }
    std::uint64_t totalDocs() const { return docStart_.back(); }
    std::uint64_t totalTokens() const { return tokenStart_.back(); }
    // The shard that holds document `doc` of the source (doc < totalDocs()).
    std::size_t shardOf(std::uint64_t doc) const;

    // Names stored (empty when namesImplied()).
    const std::vector<std::string>& names() const { return names_; }

    // From columns (the index file): counts per shard, no names.
    static ShardTable fromColumns(const std::vector<std::uint64_t>& numDocs, const std::vector<std::uint64_t>& numTokens,
                                  std::vector<std::uint32_t> tokensCrc, std::vector<std::uint32_t> offsetsCrc);
    // From the prefix columns as they are held (a broadcast), taken over without a copy.
    // Throws std::invalid_argument unless the lengths agree.
    static ShardTable fromStarts(std::vector<std::uint64_t> docStart, std::vector<std::uint64_t> tokenStart,
                                 std::vector<std::uint32_t> tokensCrc, std::vector<std::uint32_t> offsetsCrc,
                                 std::vector<std::string> names);

private:
    std::vector<std::uint64_t> docStart_{0}, tokenStart_{0};
    std::vector<std::uint32_t> tokensCrc_, offsetsCrc_;
    std::vector<std::string> names_;  // empty while every name is shardFileName(i)
    bool checksumsDropped_ = false;
    // Both columns; throws std::logic_error once dropped.
    std::pair<const std::vector<std::uint32_t>&, const std::vector<std::uint32_t>&> checksums() const;
};

}  // namespace kiln::data
