#include "kiln/data/source_manifest.hpp"

#include "kiln/base/error.hpp"
#include "kiln/comm/mpi_check.hpp"
#include "kiln/data/source_index.hpp"
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

json headerJson(const SourceManifest& m) {
    return {{"format", kManifestFormat},   {"format_version", kManifestVersion}, {"source", m.source},
            {"tokenizer_id", m.tokenizer.id}, {"vocab_size", m.tokenizer.vocabSize}, {"eos_id", m.tokenizer.eosId},
            {"token_bits", m.tokenBits},   {"n_shards", m.shards.size()},        {"n_docs", m.numDocs()},
            {"n_tokens", m.numTokens()}};
}

SourceManifest headerFromJson(const json& j) {
    SourceManifest m;
    m.source = j.at("source").get<std::string>();
    m.tokenizer = {j.at("tokenizer_id").get<std::string>(), j.at("vocab_size").get<std::uint32_t>(),
                   j.at("eos_id").get<std::uint32_t>()};
    m.tokenBits = j.at("token_bits").get<int>();
    return m;
}

}  // namespace

void writeManifest(const std::filesystem::path& sourceDir, const SourceManifest& m) {
    json j = headerJson(m);
    if (m.shards.namesImplied()) {
        writeShardIndex(sourceDir / kIndexName, m.source, m.shards);
        j["index"] = kIndexName;
    } else {  // shards under other names (hand-made sources): listed here, as in version 1
        j["shards"] = json::array();
        for (std::size_t i = 0; i < m.shards.size(); ++i) j["shards"].push_back(shardJson(m.shards[i]));
    }
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
        const auto version = j.at("format_version").get<std::int64_t>();
        if (version < kOldestManifestVersion || version > kManifestVersion)
            throw InputError(fmt::format("{}: manifest version {}, this kiln reads versions {} to {}", path.string(), version,
                                         kOldestManifestVersion, kManifestVersion));
        SourceManifest m = headerFromJson(j);
        if (j.contains("index")) {
            m.shards = readShardIndex(sourceDir / j.at("index").get<std::string>());
        } else {
            for (const auto& s : j.at("shards")) m.shards.push_back(shardFromJson(s));
        }
        if (m.numDocs() != j.at("n_docs").get<std::uint64_t>() || m.numTokens() != j.at("n_tokens").get<std::uint64_t>())
            throw InputError(fmt::format("{}: totals disagree with the sum over its shards{}", path.string(),
                                         j.contains("index") ? fmt::format(" in {}", kIndexName) : ""));
        return m;
    } catch (const json::exception& e) {
        throw InputError(fmt::format("{}: malformed manifest: {}", path.string(), e.what()));
    }
}

namespace {

// Rank `root`'s `values` (any length) into `into` on the other ranks; the
// root sends from its own vector, without a copy.
template <typename T>
void broadcastColumn(MPI_Comm comm, int root, bool isRoot, const std::vector<T>& values, std::vector<T>& into,
                     MPI_Datatype type) {
    std::uint64_t count = isRoot ? values.size() : 0;
    KILN_MPI(MPI_Bcast(&count, 1, MPI_UINT64_T, root, comm));
    if (!isRoot) into.resize(count);
    // MPI_Bcast reads the root's buffer; it takes no const pointer.
    T* data = isRoot ? const_cast<T*>(values.data()) : into.data();
    // In pieces below 2^31 elements: MPI counts are ints.
    for (std::uint64_t at = 0; at < count; at += 1u << 30)
        KILN_MPI(MPI_Bcast(data + at, static_cast<int>(std::min<std::uint64_t>(1u << 30, count - at)), type, root, comm));
}

}  // namespace

void broadcastManifest(MPI_Comm comm, int root, SourceManifest& m) {
    int rank = 0;
    KILN_MPI(MPI_Comm_rank(comm, &rank));
    const bool isRoot = rank == root;
    std::string text;
    if (isRoot) {
        json header = headerJson(m);
        header["names"] = m.shards.names();
        text = header.dump();
    }
    std::vector<char> chars;
    broadcastColumn(comm, root, isRoot, std::vector<char>(text.begin(), text.end()), chars, MPI_CHAR);
    std::vector<std::uint64_t> docStart, tokenStart;
    std::vector<std::uint32_t> tokensCrc, offsetsCrc;
    broadcastColumn(comm, root, isRoot, m.shards.docStarts(), docStart, MPI_UINT64_T);
    broadcastColumn(comm, root, isRoot, m.shards.tokenStarts(), tokenStart, MPI_UINT64_T);
    broadcastColumn(comm, root, isRoot, m.shards.tokensCrcs(), tokensCrc, MPI_UINT32_T);
    broadcastColumn(comm, root, isRoot, m.shards.offsetsCrcs(), offsetsCrc, MPI_UINT32_T);
    if (isRoot) return;
    const json received = json::parse(std::string(chars.begin(), chars.end()));
    m = headerFromJson(received);
    m.shards = ShardTable::fromStarts(std::move(docStart), std::move(tokenStart), std::move(tokensCrc), std::move(offsetsCrc),
                                      received.at("names").get<std::vector<std::string>>());
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
