#include "kiln/data/shard_table.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace kiln::data {

std::string shardFileName(std::size_t index) { return fmt::format("shard-{:05}.h5", index); }

void ShardTable::push_back(const ShardSummary& shard) {
    const std::size_t index = size();
    if (!names_.empty() || shard.file != shardFileName(index)) {
        for (std::size_t i = names_.size(); i < index; ++i) names_.push_back(shardFileName(i));
        names_.push_back(shard.file);
    }
    docStart_.push_back(docStart_.back() + shard.numDocs);
    tokenStart_.push_back(tokenStart_.back() + shard.numTokens);
    tokensCrc_.push_back(shard.tokensCrc);
    offsetsCrc_.push_back(shard.offsetsCrc);
}

void ShardTable::set(std::size_t index, const ShardSummary& shard) {
    ShardTable rebuilt;
    for (std::size_t i = 0; i < size(); ++i) rebuilt.push_back(i == index ? shard : (*this)[i]);
    *this = std::move(rebuilt);
}

ShardSummary ShardTable::operator[](std::size_t index) const {
    if (index >= size()) throw std::out_of_range(fmt::format("shard {} of {}", index, size()));
    return {file(index), numDocs(index), numTokens(index), tokensCrc(index), offsetsCrc(index)};
}

void ShardTable::dropChecksums() {
    std::vector<std::uint32_t>().swap(tokensCrc_);  // freed, not only emptied
    std::vector<std::uint32_t>().swap(offsetsCrc_);
    checksumsDropped_ = true;
}

std::pair<const std::vector<std::uint32_t>&, const std::vector<std::uint32_t>&> ShardTable::checksums() const {
    if (checksumsDropped_)
        throw std::logic_error("the shard checksums were dropped after the start-up check (ShardTable::dropChecksums)");
    return {tokensCrc_, offsetsCrc_};
}

std::string ShardTable::file(std::size_t index) const { return names_.empty() ? shardFileName(index) : names_[index]; }

std::size_t ShardTable::shardOf(std::uint64_t doc) const {
    return static_cast<std::size_t>(std::upper_bound(docStart_.begin(), docStart_.end(), doc) - docStart_.begin() - 1);
}

ShardTable ShardTable::fromColumns(const std::vector<std::uint64_t>& numDocs, const std::vector<std::uint64_t>& numTokens,
                                   std::vector<std::uint32_t> tokensCrc, std::vector<std::uint32_t> offsetsCrc) {
    ShardTable t;
    t.docStart_.reserve(numDocs.size() + 1);
    t.tokenStart_.reserve(numTokens.size() + 1);
    for (std::size_t i = 0; i < numDocs.size(); ++i) {
        t.docStart_.push_back(t.docStart_.back() + numDocs[i]);
        t.tokenStart_.push_back(t.tokenStart_.back() + numTokens[i]);
    }
    t.tokensCrc_ = std::move(tokensCrc);
    t.offsetsCrc_ = std::move(offsetsCrc);
    return t;
}

ShardTable ShardTable::fromStarts(std::vector<std::uint64_t> docStart, std::vector<std::uint64_t> tokenStart,
                                  std::vector<std::uint32_t> tokensCrc, std::vector<std::uint32_t> offsetsCrc,
                                  std::vector<std::string> names) {
    const std::size_t n = tokensCrc.size();
    if (docStart.size() != n + 1 || tokenStart.size() != n + 1 || offsetsCrc.size() != n || (!names.empty() && names.size() != n) ||
        docStart.front() != 0 || tokenStart.front() != 0)
        throw std::invalid_argument("ShardTable::fromStarts: columns of different lengths");
    ShardTable t;
    t.docStart_ = std::move(docStart);
    t.tokenStart_ = std::move(tokenStart);
    t.tokensCrc_ = std::move(tokensCrc);
    t.offsetsCrc_ = std::move(offsetsCrc);
    t.names_ = std::move(names);
    return t;
}

}  // namespace kiln::data
