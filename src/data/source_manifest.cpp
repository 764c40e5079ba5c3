#include "kiln/data/source_manifest.hpp"

#include "kiln/base/error.hpp"
#include "kiln/data/source_index.hpp"
#include "kiln/io/atomic_file.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstring>
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

// Plain bytes in host order: packed and unpacked by processes of one job.
template <typename T>
void put(std::string& out, const T* data, std::size_t count) {
    out.append(reinterpret_cast<const char*>(data), count * sizeof(T));
}

template <typename T>
void take(const std::string& in, std::size_t& at, T* data, std::size_t count) {
    const std::size_t bytes = count * sizeof(T);
    if (at + bytes > in.size()) throw std::runtime_error("unpackManifest: the bytes end early");
    std::memcpy(data, in.data() + at, bytes);
    at += bytes;
}

}  // namespace

std::string packManifest(const SourceManifest& m) {
    json header = headerJson(m);
    if (!m.shards.namesImplied()) {
        header["names"] = json::array();
        for (std::size_t i = 0; i < m.shards.size(); ++i) header["names"].push_back(m.shards.file(i));
    }
    const std::string text = header.dump();
    const std::uint64_t sizes[2] = {text.size(), m.shards.size()};
    std::string out;
    put(out, sizes, 2);
    out += text;
    put(out, m.shards.docStarts().data(), m.shards.docStarts().size());
    put(out, m.shards.tokenStarts().data(), m.shards.tokenStarts().size());
    put(out, m.shards.tokensCrcs().data(), m.shards.size());
    put(out, m.shards.offsetsCrcs().data(), m.shards.size());
    return out;
}

SourceManifest unpackManifest(const std::string& bytes) {
    std::size_t at = 0;
    std::uint64_t sizes[2];
    take(bytes, at, sizes, 2);
    if (at + sizes[0] > bytes.size()) throw std::runtime_error("unpackManifest: the bytes end early");
    const json header = json::parse(bytes.substr(at, sizes[0]));
    at += sizes[0];
    const std::size_t n = sizes[1];
    std::vector<std::uint64_t> docStart(n + 1), tokenStart(n + 1), docs(n), tokens(n);
    std::vector<std::uint32_t> tokensCrc(n), offsetsCrc(n);
    take(bytes, at, docStart.data(), n + 1);
    take(bytes, at, tokenStart.data(), n + 1);
    take(bytes, at, tokensCrc.data(), n);
    take(bytes, at, offsetsCrc.data(), n);
    for (std::size_t i = 0; i < n; ++i) {
        docs[i] = docStart[i + 1] - docStart[i];
        tokens[i] = tokenStart[i + 1] - tokenStart[i];
    }
    SourceManifest m = headerFromJson(header);
    m.shards = ShardTable::fromColumns(docs, tokens, std::move(tokensCrc), std::move(offsetsCrc));
    if (header.contains("names")) {
        ShardTable named;
        const auto names = header.at("names").get<std::vector<std::string>>();
        for (std::size_t i = 0; i < n; ++i) {
            ShardSummary s = m.shards[i];
            s.file = names.at(i);
            named.push_back(s);
        }
        m.shards = std::move(named);
    }
    return m;
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
