// The manifest of one source: `<source>/manifest.json`, listing its shards in
// order with their counts and checksums. Written last and atomically by
// kiln prep: a source directory without a manifest is incomplete.
#pragma once

#include "kiln/data/shard_writer.hpp"
#include "kiln/data/tokenizer.hpp"

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace kiln::data {

inline constexpr const char* kManifestName = "manifest.json";
inline constexpr const char* kManifestFormat = "kiln-source-manifest";
inline constexpr std::int64_t kManifestVersion = 1;

struct SourceManifest {
    std::string source;
    TokenizerInfo tokenizer;
    int tokenBits = 16;
    std::vector<ShardSummary> shards;

    std::uint64_t numDocs() const;
    std::uint64_t numTokens() const;
};

void writeManifest(const std::filesystem::path& sourceDir, const SourceManifest& manifest);
// Errors name the file and what is wrong; a missing manifest says how to make one.
SourceManifest readManifest(const std::filesystem::path& sourceDir);

// Manifest <-> JSON text (also how ranks send shard lists to rank 0).
std::string shardsToJson(const std::vector<ShardSummary>& shards);
std::vector<ShardSummary> shardsFromJson(const std::string& text);

}  // namespace kiln::data
