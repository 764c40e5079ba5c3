#include "kiln/data/source_manifest.hpp"

#include "kiln/base/error.hpp"
#include "kiln/io/atomic_file.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <fstream>

namespace kiln::data {

using nlohmann::json;

namespace {

json shardJson(const ShardSummary& s) {
    return {{"file", s.file}, {"n_docs", s.numDocs}, {"n_tokens", s.numTokens}, {"tokens_crc32", s.tokensCrc},
            {"offsets_crc32", s.offsetsCrc}};
}

ShardSummary shardFromJson(const json& j) {
    return {j.at("file").get<std::string>(), j.at("n_docs").get<std::uint64_t>(), j.at("n_tokens").get<std::uint64_t>(),
            j.at("tokens_crc32").get<std::uint32_t>(), j.at("offsets_crc32").get<std::uint32_t>()};
}

}  // namespace

std::uint64_t SourceManifest::numDocs() const {
    std::uint64_t n = 0;
    for (const auto& s : shards) n += s.numDocs;
    return n;
}

std::uint64_t SourceManifest::numTokens() const {
    std::uint64_t n = 0;
    for (const auto& s : shards) n += s.numTokens;
    return n;
}

void writeManifest(const std::filesystem::path& sourceDir, const SourceManifest& m) {
    json j = {{"format", kManifestFormat},
              {"format_version", kManifestVersion},
              {"source", m.source},
              {"tokenizer_id", m.tokenizer.id},
              {"vocab_size", m.tokenizer.vocabSize},
              {"eos_id", m.tokenizer.eosId},
              {"token_bits", m.tokenBits},
              {"n_docs", m.numDocs()},
              {"n_tokens", m.numTokens()},
              {"shards", json::array()}};
    for (const auto& s : m.shards) j["shards"].push_back(shardJson(s));
    io::writeFileAtomically(sourceDir / kManifestName, j.dump(2) + "\n");
}

SourceManifest readManifest(const std::filesystem::path& sourceDir) {
    const auto path = sourceDir / kManifestName;
    std::ifstream in(path);
    if (!in) {
        const bool dirExists = std::filesystem::is_directory(sourceDir);
        throw InputError(fmt::format("source {}: {}", sourceDir.string(),
                                     dirExists ? "no manifest.json: the source is incomplete (kiln prep was interrupted?); "
                                                 "prepare it again with kiln prep"
                                               : "no such directory; prepare it with kiln prep --source NAME --out DIR"));
    }
    try {
        const json j = json::parse(in);
        if (j.at("format").get<std::string>() != kManifestFormat)
            throw InputError(fmt::format("{}: not a kiln source manifest", path.string()));
        if (j.at("format_version").get<std::int64_t>() != kManifestVersion)
            throw InputError(fmt::format("{}: manifest version {}, this kiln reads version {}", path.string(),
                                         j.at("format_version").get<std::int64_t>(), kManifestVersion));
        SourceManifest m;
        m.source = j.at("source").get<std::string>();
        m.tokenizer = {j.at("tokenizer_id").get<std::string>(), j.at("vocab_size").get<std::uint32_t>(),
                       j.at("eos_id").get<std::uint32_t>()};
        m.tokenBits = j.at("token_bits").get<int>();
        for (const auto& s : j.at("shards")) m.shards.push_back(shardFromJson(s));
        if (m.numDocs() != j.at("n_docs").get<std::uint64_t>() || m.numTokens() != j.at("n_tokens").get<std::uint64_t>())
            throw InputError(fmt::format("{}: totals disagree with the sum over its shards", path.string()));
        return m;
    } catch (const json::exception& e) {
        throw InputError(fmt::format("{}: malformed manifest: {}", path.string(), e.what()));
    }
}

std::string shardsToJson(const std::vector<ShardSummary>& shards) {
    json j = json::array();
    for (const auto& s : shards) j.push_back(shardJson(s));
    return j.dump();
}

std::vector<ShardSummary> shardsFromJson(const std::string& text) {
    std::vector<ShardSummary> shards;
    for (const auto& s : json::parse(text)) shards.push_back(shardFromJson(s));
    return shards;
}

}  // namespace kiln::data
