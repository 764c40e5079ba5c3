#include "kiln/data/source_verify.hpp"

#include "kiln/base/error.hpp"
#include "kiln/data/doc_lengths.hpp"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <bit>
#include <memory>

namespace kiln::data {
namespace {

constexpr std::uint64_t kBlock = 1u << 20;

std::uint32_t crcOf(std::uint32_t crc, const void* data, std::size_t bytes) {
    return static_cast<std::uint32_t>(crc32(crc, static_cast<const Bytef*>(data), static_cast<uInt>(bytes)));
}

void addLength(SourceStats& stats, std::uint64_t length) {
    stats.minLength = stats.numDocs == 0 ? length : std::min(stats.minLength, length);
    stats.maxLength = std::max(stats.maxLength, length);
    const std::size_t bucket = std::min<std::size_t>(std::bit_width(length), stats.lengthHistogram.size() - 1);
    ++stats.lengthHistogram[bucket];
    ++stats.numDocs;
    stats.numTokens += length;
}

// `lengths`: the source's length index, checked document by document against the offsets (or null).
void verifyShard(SourceReader& reader, std::size_t shard, DocLengths* lengths, VerifyReport& report) {
    const auto& entry = reader.manifest().shards[shard];
    const std::string name = reader.shardPath(shard).string();
    const int bytesPerToken = reader.manifest().tokenBits / 8;
    const std::uint32_t vocab = reader.manifest().tokenizer.vocabSize;

    std::vector<std::uint32_t> tokens;
    std::vector<std::uint16_t> narrow;
    std::uint32_t crc = 0;
    std::uint64_t badIds = 0, firstBad = 0;
    for (std::uint64_t at = 0; at < entry.numTokens; at += kBlock) {
        const std::uint64_t n = std::min(kBlock, entry.numTokens - at);
        tokens.resize(n);
        reader.readShardTokens(shard, at, n, tokens.data());
        if (bytesPerToken == 2) {
            narrow.assign(tokens.begin(), tokens.end());
            crc = crcOf(crc, narrow.data(), n * 2);
        } else {
            crc = crcOf(crc, tokens.data(), n * 4);
        }
        for (std::uint64_t i = 0; i < n; ++i)
            if (tokens[i] >= vocab && badIds++ == 0) firstBad = at + i;
    }
    if (crc != entry.tokensCrc)
        report.problems.push_back(fmt::format("{}: /tokens checksum {:08x} does not match the recorded {:08x}: the shard is "
                                              "corrupt",
                                              name, crc, entry.tokensCrc));
    if (badIds > 0)
        report.problems.push_back(fmt::format("{}: {} token ids are not below the vocabulary size {} (first at token {})",
                                              name, badIds, vocab, firstBad));

    std::vector<std::uint64_t> offsets;
    std::uint32_t offsetsCrc = 0;
    std::uint64_t previous = 0;
    bool monotone = true, lengthsAgree = true;
    const std::uint64_t firstDoc = reader.manifest().shards.docStarts()[shard];
    for (std::uint64_t at = 0; at < entry.numDocs + 1; at += kBlock) {
        const std::uint64_t n = std::min(kBlock, entry.numDocs + 1 - at);
        offsets.resize(n);
        reader.readShardOffsets(shard, at, n, offsets.data());
        offsetsCrc = crcOf(offsetsCrc, offsets.data(), n * sizeof(std::uint64_t));
        for (std::uint64_t i = 0; i < n; ++i) {
            if (at + i == 0) {
                if (offsets[0] != 0) report.problems.push_back(fmt::format("{}: doc_offsets[0] is {}, not 0", name, offsets[0]));
            } else {
                if (offsets[i] < previous && monotone) {
                    monotone = false;
                    report.problems.push_back(
                        fmt::format("{}: doc_offsets decrease at document {} ({} < {})", name, at + i - 1, offsets[i], previous));
                }
                const std::uint64_t length = offsets[i] >= previous ? offsets[i] - previous : 0;
                addLength(report.stats, length);
                const std::uint64_t doc = firstDoc + at + i - 1;
                if (lengths && lengthsAgree && lengths->length(doc) != length) {
                    lengthsAgree = false;
                    report.problems.push_back(fmt::format("{}: document {} has {} tokens there but {} in {} (document {} of "
                                                          "the shard); write it again with kiln inspect --write-lengths",
                                                          lengths->path().string(), doc, lengths->length(doc), length, name,
                                                          at + i - 1));
                }
            }
            previous = offsets[i];
        }
    }
    if (previous != entry.numTokens)
        report.problems.push_back(fmt::format("{}: the last doc_offset is {}, not the token count {}", name, previous, entry.numTokens));
    if (offsetsCrc != entry.offsetsCrc)
        report.problems.push_back(fmt::format("{}: /doc_offsets checksum {:08x} does not match the recorded {:08x}", name,
                                              offsetsCrc, entry.offsetsCrc));
}

}  // namespace

VerifyReport verifySource(SourceReader& reader) {
    VerifyReport report;
    std::unique_ptr<DocLengths> lengths;
    if (const auto path = reader.directory() / kDocLengthsName; std::filesystem::exists(path)) {
        try {
            lengths = std::make_unique<DocLengths>(path, reader.manifest());
        } catch (const Error& e) {
            report.problems.push_back(e.what());
        }
    }
    for (std::size_t shard = 0; shard < reader.manifest().shards.size(); ++shard) {
        try {
            verifyShard(reader, shard, lengths.get(), report);
        } catch (const Error& e) {
            report.problems.push_back(e.what());
        }
    }
    return report;
}

}  // namespace kiln::data
