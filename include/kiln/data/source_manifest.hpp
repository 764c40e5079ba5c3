// The manifest of one source: `<source>/manifest.json`, what a person reads
// (source, tokenizer, totals), and `<source>/index.h5`, the shards in order
// with their counts and checksums as columns that any number of shards keeps
// small. Written by kiln prep, the index first and the JSON last and
// atomically: a source directory without manifest.json is incomplete.
// Sources of manifest version 1 list their shards in the JSON; they stay readable.
#pragma once

#include "kiln/data/shard_table.hpp"
#include "kiln/data/tokenizer.hpp"

#include <mpi.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace kiln::data {

inline constexpr const char* kManifestName = "manifest.json";
inline constexpr const char* kIndexName = "index.h5";
inline constexpr const char* kManifestFormat = "kiln-source-manifest";
inline constexpr std::int64_t kManifestVersion = 2;        // 2: shards in index.h5
inline constexpr std::int64_t kOldestManifestVersion = 1;  // 1: shards listed in manifest.json

struct SourceManifest {
    std::string source;
    TokenizerInfo tokenizer;
    int tokenBits = 16;
    ShardTable shards;

    std::uint64_t numDocs() const { return shards.totalDocs(); }
    std::uint64_t numTokens() const { return shards.totalTokens(); }
};

void writeManifest(const std::filesystem::path& sourceDir, const SourceManifest& manifest);
// Errors name the file and what is wrong; a missing manifest says how to make one.
SourceManifest readManifest(const std::filesystem::path& sourceDir);

// Collective over `comm`: rank `root`'s manifest on every rank. The shard
// columns travel straight into their final vectors (24 bytes a shard, no
// serialised copy beside them).
void broadcastManifest(MPI_Comm comm, int root, SourceManifest& manifest);

// Shard lists <-> JSON text (how prep's ranks send their shards to rank 0).
std::string shardsToJson(const std::vector<ShardSummary>& shards);
std::vector<ShardSummary> shardsFromJson(const std::string& text);

}  // namespace kiln::data
