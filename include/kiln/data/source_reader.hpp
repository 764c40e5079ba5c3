// Reads a prepared source: any token range of any document, touching only the
// chunks that hold it. Memory does not grow with the corpus: document offsets
// are read on demand through HDF5's chunk cache, shards are opened lazily and
// at most `maxOpenShards` stay open.
#pragma once

#include "kiln/data/source_manifest.hpp"
#include "kiln/io/hdf5.hpp"

#include <cstdint>
#include <deque>
#include <filesystem>
#include <memory>
#include <vector>

namespace kiln::data {

struct ReaderOptions {
    std::size_t tokenCacheBytes = 4u << 20;   // per open shard
    std::size_t offsetCacheBytes = 1u << 20;  // per open shard
    std::size_t maxOpenShards = 64;
    // Open every shard's metadata at construction (existence, counts, tokenizer
    // against the manifest), so that a missing or mismatched shard is found at
    // start-up, not when the stream first reaches it. No tokens are read.
    bool checkShardsAtOpen = true;
};

// Where one document lives.
struct DocumentSpan {
    std::size_t shard = 0;
    std::uint64_t begin = 0;  // token index within the shard
    std::uint64_t end = 0;
    std::uint64_t length() const { return end - begin; }
};

class SourceReader {
public:
    explicit SourceReader(std::filesystem::path sourceDir, ReaderOptions options = {});
    ~SourceReader();
    SourceReader(const SourceReader&) = delete;
    SourceReader& operator=(const SourceReader&) = delete;

    const SourceManifest& manifest() const { return manifest_; }
    const std::filesystem::path& directory() const { return dir_; }
    std::uint64_t numDocuments() const { return docStart_.back(); }
    std::uint64_t numTokens() const { return manifest_.numTokens(); }

    DocumentSpan locate(std::uint64_t doc);
    std::uint64_t documentLength(std::uint64_t doc) { return locate(doc).length(); }
    // Tokens [begin, begin+count) of document `doc` into `out`.
    void readTokens(std::uint64_t doc, std::uint64_t begin, std::uint64_t count, std::uint32_t* out);
    std::vector<std::uint32_t> readDocument(std::uint64_t doc);

    // Raw access for verification: `count` tokens / offsets of shard `shard` from `at`.
    void readShardTokens(std::size_t shard, std::uint64_t at, std::uint64_t count, std::uint32_t* out);
    void readShardOffsets(std::size_t shard, std::uint64_t at, std::uint64_t count, std::uint64_t* out);
    std::filesystem::path shardPath(std::size_t shard) const { return dir_ / manifest_.shards[shard].file; }

    // Throws InputError naming both tokenizers unless the source was prepared with `expected`.
    void requireTokenizer(const TokenizerInfo& expected) const;
    // Whether every shard checked so far carries per-chunk checksums (format 2 and later).
    bool checksummed() const { return checksummed_; }

private:
    struct OpenShard;
    OpenShard& open(std::size_t shard);

    std::filesystem::path dir_;
    ReaderOptions options_;
    SourceManifest manifest_;
    std::vector<std::uint64_t> docStart_;  // first global document of each shard; back() = total
    std::vector<std::unique_ptr<OpenShard>> shards_;
    std::deque<std::size_t> openOrder_;
    std::vector<std::uint16_t> narrow_;  // read buffer for 16-bit shards
    bool checksummed_ = true;
};

}  // namespace kiln::data
