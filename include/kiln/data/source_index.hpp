// `<source>/index.h5`: a source's shard table as HDF5 columns (n_docs,
// n_tokens: uint64; tokens_crc32, offsets_crc32: uint32; one row per shard,
// shard i being shardFileName(i)) with the totals as attributes. Read whole
// in four contiguous reads: 24 bytes a shard, no parsing.
#pragma once

#include "kiln/data/shard_table.hpp"

#include <filesystem>
#include <string>

namespace kiln::data {

inline constexpr const char* kIndexFormat = "kiln-source-index";
inline constexpr std::int64_t kIndexVersion = 1;

// `shards` must have prep's names (namesImplied()).
void writeShardIndex(const std::filesystem::path& path, const std::string& source, const ShardTable& shards);
// Checks the format and that the columns agree with each other and with the
// attribute totals; errors name the file.
ShardTable readShardIndex(const std::filesystem::path& path);

}  // namespace kiln::data
