#include "kiln/data/source_reader.hpp"

#include "kiln/base/error.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace kiln::data {

namespace h5 = io::h5;

// Offsets are read in small aligned blocks and the last block is kept: a
// sequential scan needs one HDF5 read per document instead of two, and memory
// stays at one block per open shard.
constexpr std::uint64_t kOffsetBlock = 512;

struct SourceReader::OpenShard {
    h5::Handle file, tokens, offsets;
    h5::Handle tokenSpace, offsetSpace, memSpace;  // reused: creating them costs more than the read
    std::vector<std::uint64_t> offsetBlock;
    std::uint64_t offsetBlockStart = ~std::uint64_t{0};
};

namespace {

h5::Handle openCached(hid_t file, const char* name, std::size_t cacheBytes, const std::string& context) {
    h5::Handle access(KILN_H5(H5Pcreate(H5P_DATASET_ACCESS), context));
    // 521 slots (a prime, as HDF5 advises); w0 = 1: evict fully read chunks first.
    KILN_H5(H5Pset_chunk_cache(access, 521, cacheBytes, 1.0), context);
    if (H5Lexists(file, name, H5P_DEFAULT) <= 0)
        throw InputError(fmt::format("{}: dataset /{} is missing", context, name), ErrorScope::ThisRank);
    return h5::Handle(KILN_H5(H5Dopen2(file, name, access), context));
}

void readRange(hid_t dataset, hid_t fileSpace, hid_t memSpace, hid_t memType, std::uint64_t at, std::uint64_t count,
               void* out, const std::string& context) {
    if (count == 0) return;
    hsize_t start[1] = {at}, n[1] = {count};
    KILN_H5(H5Sselect_hyperslab(fileSpace, H5S_SELECT_SET, start, nullptr, n, nullptr), context);
    KILN_H5(H5Sset_extent_simple(memSpace, 1, n, nullptr), context);
    KILN_H5(H5Dread(dataset, memType, memSpace, fileSpace, H5P_DEFAULT, out), context);
}

}  // namespace

SourceReader::SourceReader(std::filesystem::path sourceDir, ReaderOptions options)
    : dir_(std::move(sourceDir)), options_(options), manifest_(readManifest(dir_)) {
    h5::LibraryLock lock(h5::libraryMutex());
    h5::quietErrors();
    docStart_.push_back(0);
    for (const auto& s : manifest_.shards) docStart_.push_back(docStart_.back() + s.numDocs);
    shards_.resize(manifest_.shards.size());
    if (!options_.checkShardsAtOpen) return;
    for (std::size_t i = 0; i < shards_.size(); ++i) {
        // Every rank opening the source meets the same problem: an error of all ranks.
        try {
            open(i);
        } catch (const InputError& e) {
            throw InputError(e.what(), ErrorScope::AllRanks);
        }
        // Keep at most a few open after the check: the stream opens what it needs.
        if (openOrder_.size() > 4) {
            shards_[openOrder_.front()].reset();
            openOrder_.pop_front();
        }
    }
}

SourceReader::~SourceReader() {
    h5::LibraryLock lock(h5::libraryMutex());
    shards_.clear();
}

SourceReader::OpenShard& SourceReader::open(std::size_t index) {
    if (shards_[index]) return *shards_[index];
    if (openOrder_.size() >= options_.maxOpenShards) {
        shards_[openOrder_.front()].reset();
        openOrder_.pop_front();
    }
    const auto& entry = manifest_.shards[index];
    const std::string context = shardPath(index).string();
    if (!std::filesystem::exists(shardPath(index)))
        throw InputError(fmt::format("{}: shard listed in the manifest is missing", context), ErrorScope::ThisRank);
    auto shard = std::make_unique<OpenShard>();
    shard->file = h5::Handle(H5Fopen(context.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
    if (!shard->file.valid())
        throw InputError(fmt::format("{}: cannot open the shard: the file is truncated or is not HDF5 ({} bytes on disk)",
                                     context, std::filesystem::file_size(shardPath(index))),
                         ErrorScope::ThisRank);
    const ShardHeader header = readShardHeader(shard->file, context);
    if (header.formatVersion < 2) checksummed_ = false;
    const auto mismatch = [&](const char* what, auto inFile, auto inManifest) {
        return InputError(fmt::format("{}: {} is {} in the shard but {} in {}; the source is inconsistent, prepare it again",
                                      context, what, inFile, inManifest, (dir_ / kManifestName).string()),
                          ErrorScope::ThisRank);
    };
    if (header.numDocs != entry.numDocs) throw mismatch("n_docs", header.numDocs, entry.numDocs);
    if (header.numTokens != entry.numTokens) throw mismatch("n_tokens", header.numTokens, entry.numTokens);
    if (header.tokensCrc != entry.tokensCrc) throw mismatch("tokens_crc32", header.tokensCrc, entry.tokensCrc);
    if (header.tokenizer.id != manifest_.tokenizer.id) throw mismatch("tokenizer_id", header.tokenizer.id, manifest_.tokenizer.id);
    if (header.tokenBits != manifest_.tokenBits) throw mismatch("token_bits", header.tokenBits, manifest_.tokenBits);
    shard->tokens = openCached(shard->file, "tokens", options_.tokenCacheBytes, context);
    shard->offsets = openCached(shard->file, "doc_offsets", options_.offsetCacheBytes, context);
    shard->tokenSpace = h5::Handle(KILN_H5(H5Dget_space(shard->tokens), context));
    shard->offsetSpace = h5::Handle(KILN_H5(H5Dget_space(shard->offsets), context));
    hsize_t one[1] = {1};
    shard->memSpace = h5::Handle(KILN_H5(H5Screate_simple(1, one, nullptr), context));
    if (h5::extent1d(shard->tokens, context) != entry.numTokens)
        throw mismatch("the length of /tokens", h5::extent1d(shard->tokens, context), entry.numTokens);
    if (h5::extent1d(shard->offsets, context) != entry.numDocs + 1)
        throw mismatch("the length of /doc_offsets", h5::extent1d(shard->offsets, context), entry.numDocs + 1);
    shards_[index] = std::move(shard);
    openOrder_.push_back(index);
    return *shards_[index];
}

DocumentSpan SourceReader::locate(std::uint64_t doc) {
    h5::LibraryLock lock(h5::libraryMutex());
    if (doc >= numDocuments())
        throw std::out_of_range(fmt::format("document {} of source {} (it has {})", doc, manifest_.source, numDocuments()));
    const std::size_t shard =
        static_cast<std::size_t>(std::upper_bound(docStart_.begin(), docStart_.end(), doc) - docStart_.begin() - 1);
    OpenShard& s = open(shard);
    const std::uint64_t local = doc - docStart_[shard];
    if (local < s.offsetBlockStart || local + 1 >= s.offsetBlockStart + s.offsetBlock.size()) {
        s.offsetBlockStart = local - local % kOffsetBlock;
        s.offsetBlock.resize(std::min(kOffsetBlock + 1, manifest_.shards[shard].numDocs + 1 - s.offsetBlockStart));
        readShardOffsets(shard, s.offsetBlockStart, s.offsetBlock.size(), s.offsetBlock.data());
    }
    const std::uint64_t bounds[2] = {s.offsetBlock[local - s.offsetBlockStart], s.offsetBlock[local + 1 - s.offsetBlockStart]};
    if (bounds[1] < bounds[0] || bounds[1] > manifest_.shards[shard].numTokens)
        throw InputError(fmt::format("{}: doc_offsets are corrupt around document {} ({} .. {})", shardPath(shard).string(),
                                     doc - docStart_[shard], bounds[0], bounds[1]),
                         ErrorScope::ThisRank);
    return {shard, bounds[0], bounds[1]};
}

void SourceReader::readTokens(std::uint64_t doc, std::uint64_t begin, std::uint64_t count, std::uint32_t* out) {
    const DocumentSpan span = locate(doc);
    if (begin + count > span.length())
        throw std::out_of_range(fmt::format("tokens [{}, {}) of document {} of length {}", begin, begin + count, doc,
                                            span.length()));
    readShardTokens(span.shard, span.begin + begin, count, out);
    // An id outside the vocabulary would index past the embedding: never hand it on.
    const std::uint32_t vocab = manifest_.tokenizer.vocabSize;
    for (std::uint64_t i = 0; i < count; ++i)
        if (out[i] >= vocab)
            throw InputError(fmt::format("source {}: {}: document {} (number {} of the shard), token {} is id {}, outside "
                                         "the vocabulary of {}; the shard is corrupt.\n  Check it with kiln inspect {} "
                                         "and prepare the source again.",
                                         manifest_.source, shardPath(span.shard).string(), doc, doc - docStart_[span.shard],
                                         begin + i, out[i], vocab, dir_.string(), dir_.string()),
                             ErrorScope::ThisRank);
}

namespace {

// A failed read of stored data (a Fletcher-32 mismatch, a truncated file) as an
// error that names the source, the shard and the chunk, and says what to do.
// `readChunk(k)` reads chunk k alone: on this error path only, the chunks of
// the range are read one by one to name the one that is corrupt.
template <typename ReadChunk>
[[noreturn]] void corruptRead(const std::string& source, const std::filesystem::path& dir, const std::string& shard,
                              const char* what, std::uint64_t at, std::uint64_t count, std::uint64_t chunk,
                              const std::string& cause, ReadChunk&& readChunk) {
    std::uint64_t bad = at / chunk;
    for (std::uint64_t k = at / chunk; k <= (at + count - 1) / chunk; ++k) {
        try {
            readChunk(k);
        } catch (const Error&) {
            bad = k;
            break;
        }
    }
    throw InputError(fmt::format("source {}: {}: reading {} [{}, {}) failed in chunk {} ({} [{}, {})): the stored data is "
                                 "corrupt ({}).\n  Check it with kiln inspect {} and prepare the source again.",
                                 source, shard, what, at, at + count, bad, what, bad * chunk, (bad + 1) * chunk, cause,
                                 dir.string()),
                     ErrorScope::ThisRank);
}

}  // namespace

std::vector<std::uint32_t> SourceReader::readDocument(std::uint64_t doc) {
    const DocumentSpan span = locate(doc);
    std::vector<std::uint32_t> tokens(span.length());
    readShardTokens(span.shard, span.begin, span.length(), tokens.data());
    return tokens;
}

void SourceReader::readShardTokens(std::size_t shard, std::uint64_t at, std::uint64_t count, std::uint32_t* out) {
    h5::LibraryLock lock(h5::libraryMutex());
    OpenShard& s = open(shard);
    const std::string context = shardPath(shard).string();
    try {
        if (manifest_.tokenBits == 32) {
            readRange(s.tokens, s.tokenSpace, s.memSpace, H5T_NATIVE_UINT32, at, count, out, context);
            return;
        }
        // Read at the stored width and widen here: cheaper than HDF5's type conversion.
        narrow_.resize(count);
        readRange(s.tokens, s.tokenSpace, s.memSpace, H5T_NATIVE_UINT16, at, count, narrow_.data(), context);
    } catch (const LibraryError& e) {
        const std::uint64_t total = manifest_.shards[shard].numTokens;
        std::vector<std::uint32_t> one(kTokenChunk);
        corruptRead(manifest_.source, dir_, context, "tokens", at, count, kTokenChunk, e.what(), [&](std::uint64_t k) {
            const std::uint64_t from = k * kTokenChunk, n = std::min(kTokenChunk, total - from);
            readRange(s.tokens, s.tokenSpace, s.memSpace, H5T_NATIVE_UINT32, from, n, one.data(), context);
        });
    }
    std::copy(narrow_.begin(), narrow_.end(), out);
}

void SourceReader::readShardOffsets(std::size_t shard, std::uint64_t at, std::uint64_t count, std::uint64_t* out) {
    h5::LibraryLock lock(h5::libraryMutex());
    OpenShard& s = open(shard);
    const std::string context = shardPath(shard).string();
    try {
        readRange(s.offsets, s.offsetSpace, s.memSpace, H5T_NATIVE_UINT64, at, count, out, context);
    } catch (const LibraryError& e) {
        const std::uint64_t total = manifest_.shards[shard].numDocs + 1;
        std::vector<std::uint64_t> one(kOffsetChunk);
        corruptRead(manifest_.source, dir_, context, "document offsets", at, count, kOffsetChunk, e.what(),
                    [&](std::uint64_t k) {
                        const std::uint64_t from = k * kOffsetChunk, n = std::min(kOffsetChunk, total - from);
                        readRange(s.offsets, s.offsetSpace, s.memSpace, H5T_NATIVE_UINT64, from, n, one.data(), context);
                    });
    }
}

void SourceReader::requireTokenizer(const TokenizerInfo& expected) const {
    const auto& actual = manifest_.tokenizer;
    if (expected.is(actual.id) && actual.vocabSize == expected.vocabSize && actual.eosId == expected.eosId) return;
    throw InputError(fmt::format(
        "source {} was prepared with tokenizer {} (vocabulary {}, EOS {}), but this run uses tokenizer {} (vocabulary {}, "
        "EOS {}).\n  Prepare the source again with the run's tokenizer, or name the tokenizer it was prepared with.",
        dir_.string(), actual.id, actual.vocabSize, actual.eosId, expected.id, expected.vocabSize, expected.eosId));
}

}  // namespace kiln::data
