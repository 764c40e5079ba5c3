// Reads a prepared source: any token range of any document, touching only the
// chunks that hold it. Memory does not grow with the corpus: document offsets
// are read on demand through HDF5's chunk cache, shards are opened lazily and
// at most `maxOpenShards` stay open; small shards and shuffle blocks are held
// in memory within a budget, read with preads where their chunks' places are
// known (shard_chunks.hpp), else through HDF5.
#pragma once

#include "kiln/base/read_buffer.hpp"
#include "kiln/base/unique_fd.hpp"
#include "kiln/data/doc_lengths.hpp"
#include "kiln/data/shard_chunks.hpp"
#include "kiln/data/source_manifest.hpp"
#include "kiln/io/hdf5.hpp"

#include <cstdint>
#include <deque>
#include <filesystem>
#include <list>
#include <map>
#include <memory>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

namespace kiln::data {

// Open shard files a reader keeps (data.open_shards): a quarter more than the
// blocks of a default shuffle window (a block may straddle two shards), so
// that large shards are opened about once per window.
inline constexpr std::size_t kDefaultOpenShards = 80;

struct ReaderOptions {
    // HDF5's chunk cache per open shard: two chunks (a window reads about one
    // block, a chunk or two, from each shard it touches). With up to 128 open
    // shards, 4 MiB each had let the loader hold 120 MB.
    std::size_t tokenCacheBytes = 2 * kTokenChunk * sizeof(std::uint32_t);
    std::size_t offsetCacheBytes = 2 * kOffsetChunk * sizeof(std::uint64_t);
    std::size_t maxOpenShards = kDefaultOpenShards;  // shards read through HDF5, each an open file
    // Without blocks (blockDocs = 0), and for raw access to a shard, shards of
    // at most wholeShardDocs documents and wholeShardBytes (as 32-bit tokens
    // and offsets) are read whole when first reached and held in memory, their
    // file closed, up to shardMemoryBytes per reader: small shards cost neither
    // a handle each nor an opening per document.
    std::uint64_t wholeShardDocs = 128;
    std::uint64_t wholeShardBytes = 1u << 20;
    std::uint64_t shardMemoryBytes = 64u << 20;
    // With blocks, every shard of short documents, small or large, is read by
    // the shuffle block (data.shuffle_block documents of the source, the unit
    // a window takes from a shard; a small shard's part of one): the block's
    // offsets and tokens at once, the file closed, held within shardMemoryBytes.
    // Reading a small shard whole brought the documents of the other blocks it
    // straddles, evicted before their windows came. A window then holds no
    // file open: an open HDF5 file costs about 1 MB, a block of 64 documents
    // of a thousand tokens a quarter of that. Shards whose blocks average more
    // than wholeShardBytes stay open files read by the chunk. 0: never.
    std::uint64_t blockDocs = 64;
    // Where the chunks of shards read by the block lie, noted at a shard's
    // first block and kept, least recently used first out, within this many
    // bytes: its later blocks are read with preads instead of an HDF5 opening
    // each (about 60 us). 8 bytes a chunk: 8 MiB holds every list of a source
    // of 1 k shards of 1.5 M tokens (200 bytes each) or a thousand of 64 Mi tokens.
    std::uint64_t chunkListBytes = 8u << 20;
    // Blocks read for their offsets alone, their tokens at the first document
    // of them that is read: a rank plans the whole global batch from document
    // lengths but reads only its slice (none on a pipeline's middle stages),
    // and with a slice of a per cent most blocks of a window hold none of its
    // documents. Costs a second opening for the blocks that are read
    // (DataLoader sets it for empty and small slices).
    bool blockTokensOnDemand = false;
    // The start-up table of shards whose chunks lie back to back costs 32
    // bytes a shard; a source of more shards than fit here (500 k) keeps none,
    // so that memory stays bounded: its shards are read through HDF5, those
    // read by the block with the chunk lists above.
    std::uint64_t chunkTableBytes = 16u << 20;
    // false: no chunk places are noted, every read goes through HDF5.
    bool readWithPreads = true;
    // Plan from the source's doc_lengths.h5 where it has one (doc_lengths.hpp):
    // a rank then opens only the shards whose tokens it reads. false: from the
    // shards' offsets, as for a source without it.
    bool useLengthIndex = true;
    // Open every shard's metadata at construction (existence, counts, tokenizer
    // against the manifest), so that a missing or mismatched shard is found at
    // start-up, not when the stream first reaches it. No tokens are read.
    // Ranks that open a source together divide this work instead (Corpus).
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
    // With the manifest already read (by another rank, which sent it).
    SourceReader(std::filesystem::path sourceDir, SourceManifest manifest, ReaderOptions options);
    ~SourceReader();
    SourceReader(const SourceReader&) = delete;
    SourceReader& operator=(const SourceReader&) = delete;

    const SourceManifest& manifest() const { return manifest_; }
    const std::filesystem::path& directory() const { return dir_; }
    std::uint64_t numDocuments() const { return manifest_.numDocs(); }
    std::uint64_t numTokens() const { return manifest_.numTokens(); }

    DocumentSpan locate(std::uint64_t doc);
    // From the length index where there is one (no shard is opened), else from the shard's offsets.
    std::uint64_t documentLength(std::uint64_t doc);
    // Whether lengths come from doc_lengths.h5, and its groups read so far.
    bool plansFromLengthIndex() const { return lengths_ != nullptr; }
    std::uint64_t lengthGroupReads() const { return lengths_ ? lengths_->groupReads() : 0; }
    // Tokens [begin, begin+count) of document `doc` into `out`.
    void readTokens(std::uint64_t doc, std::uint64_t begin, std::uint64_t count, std::uint32_t* out);
    std::vector<std::uint32_t> readDocument(std::uint64_t doc);

    // Raw access for verification: `count` tokens / offsets of shard `shard` from `at`.
    void readShardTokens(std::size_t shard, std::uint64_t at, std::uint64_t count, std::uint32_t* out);
    void readShardOffsets(std::size_t shard, std::uint64_t at, std::uint64_t count, std::uint64_t* out);
    std::filesystem::path shardPath(std::size_t shard) const { return dir_ / manifest_.shards.file(shard); }

    // Opens shards [begin, end) and checks their metadata against the manifest
    // (InputError naming the shard, of this rank), keeping few of them open.
    // For shards to be read whole or by the block it notes where their chunks
    // lie when they lie back to back (shardChunks).
    void checkShards(std::size_t begin, std::size_t end);
    // Where the chunks of shards read whole lie, one entry a shard (empty when
    // none is known): those the checks found, or what setShardChunks gave.
    // Ranks that divide the checks combine theirs (Corpus).
    const std::vector<ShardChunks>& shardChunks() const { return chunks_; }
    void setShardChunks(std::vector<ShardChunks> chunks);
    // Every shard's metadata has been checked (by the ranks together): later
    // openings check only what they read (dataset lengths, chunk checksums).
    void markAllChecked();
    // After markAllChecked(), for a reader that only streams: the manifest's
    // checksums are no longer needed (verification, kiln inspect, keeps them).
    void dropShardChecksums() { manifest_.shards.dropChecksums(); }
    // ReaderOptions::blockTokensOnDemand, for the blocks read from now on.
    void setBlockTokensOnDemand(bool onDemand) { options_.blockTokensOnDemand = onDemand; }
    // Shard files opened so far (checks and reopenings after eviction included),
    // files open now, and shards held whole in memory now.
    std::uint64_t shardOpenings() const { return openings_; }
    std::size_t openShards() const { return openOrder_.size(); }
    std::size_t shardsInMemory() const { return heldShards_; }
    std::size_t blocksInMemory() const { return heldBlocks_; }
    // Shards and blocks read with preads, without opening their file through HDF5 (shard_chunks.hpp).
    std::uint64_t directReads() const { return directReads_; }
    // Blocks whose tokens were read (with their offsets, or on demand).
    std::uint64_t blockTokenReads() const { return blockTokenReads_; }
    std::uint64_t memoryBudget() const { return options_.shardMemoryBytes; }

    // Throws InputError naming both tokenizers unless the source was prepared with `expected`.
    void requireTokenizer(const TokenizerInfo& expected) const;
    // Whether every shard checked so far carries per-chunk checksums (format 2 and later).
    bool checksummed() const { return checksummed_; }

private:
    struct OpenShard;
    OpenShard& open(std::size_t shard);
    // The shard's file opened and its metadata checked against the manifest.
    // `whole`: about to be read whole (no chunk cache).
    std::unique_ptr<OpenShard> openFile(std::size_t shard, bool whole);
    void readFromFile(std::size_t shard, OpenShard& s, bool tokens, std::uint64_t at, std::uint64_t count, void* out);
    // A shard read whole into memory: by its chunk places when known and sound, else through HDF5.
    std::unique_ptr<OpenShard> readWholeShard(std::size_t shard);
    bool readDirectly(std::size_t shard, OpenShard& into);
    void rememberChunks(std::size_t shard, const OpenShard& opened);
    std::uint64_t wholeBytes(std::size_t shard) const;
    bool readWhole(std::size_t shard) const;
    // A shuffle block's documents in one shard, held in memory.
    struct HeldBlock;
    bool readByBlock(std::size_t shard) const;
    // The held piece of a block that holds `doc`, or null: found by the block
    // number alone, before (and instead of) a search for the document's shard.
    HeldBlock* heldPiece(std::uint64_t doc);
    // The piece of `doc`'s block that lies in `shard`, read now (not held).
    HeldBlock& readBlock(std::size_t shard, std::uint64_t doc);
    // A block's offsets and tokens (or one of them): with preads where the
    // shard's chunk list is held (false when not, or on any doubt), else
    // through HDF5, which notes the list for the shard's next blocks.
    enum class BlockPart { Whole, Offsets, Tokens };
    bool readBlockDirectly(std::size_t shard, HeldBlock& held, BlockPart part);
    void readBlockThroughHdf5(std::size_t shard, HeldBlock& held, BlockPart part);
    // The tokens of a block held by its offsets alone (blockTokensOnDemand), at their first use.
    void readBlockTokens(std::size_t shard, HeldBlock& held);
    // InputError naming the length index and the shard unless the documents
    // from `firstDoc` (of the source), bounded by `offsets`, have the index's lengths.
    void checkLengths(std::size_t shard, std::uint64_t firstDoc, std::span<const std::uint64_t> offsets);
    // The first document whose offsets are out of order or past the shard's end
    // (`offsets` holds a block's bounds), or offsets.size() when none is.
    static std::size_t firstUnsoundOffset(std::span<const std::uint64_t> offsets, std::uint64_t numTokens);
    // Drops what is known of the shard's chunks (all of the start-up table),
    // true if anything was: after HDF5 read what a direct read refused.
    bool forgetPlaces(std::size_t shard);
    // Notes the chunk list of a shard read by the block (file: opened through HDF5), from its second block on.
    void noteChunkList(std::size_t shard, const OpenShard& file);
    struct BlockChunks {
        ChunkList tokens, offsets;  // empty: the shard was read once, the lists not looked up yet
        std::uint64_t lastUse = 0;
        bool known() const { return !tokens.at.empty(); }
        std::uint64_t bytes() const { return (tokens.at.size() + offsets.at.size()) * sizeof(std::uint64_t) + sizeof(*this) + 64; }
    };
    // Where a located document's tokens are: a held block, or the shard's
    // record (held whole, or an open file).
    struct Location {
        HeldBlock* block = nullptr;
        OpenShard* shard = nullptr;
    };
    // locate(), and where the document's tokens are: readTokens copies from
    // there without a second lookup of the shard.
    DocumentSpan locate(std::uint64_t doc, Location& where);
    // Evicts the least recently used whole shards and blocks until `bytes` more
    // fit (all but the most recently used one, with `keepNewest`).
    void makeRoom(std::uint64_t bytes, bool keepNewest = false);
    // Buffers of evicted shards and blocks, reused by the next read: a stream
    // evicts one for every one it reads, and allocating and freeing a small
    // shard's tokens was 2 % of the loader's time on 100 k shards.
    void keepBuffers(ReadBuffer<std::uint32_t>& tokens, ReadBuffer<std::uint64_t>& offsets);
    void takeBuffers(ReadBuffer<std::uint32_t>& tokens, ReadBuffer<std::uint64_t>& offsets);
    std::vector<std::pair<ReadBuffer<std::uint32_t>, ReadBuffer<std::uint64_t>>> spareBuffers_;

    std::filesystem::path dir_;
    ReaderOptions options_;
    SourceManifest manifest_;
    io::h5::Handle fileAccess_, tokenAccess_, offsetAccess_;  // property lists every opening uses
    std::vector<std::unique_ptr<OpenShard>> shards_;
    std::deque<std::size_t> openOrder_;    // shards read through HDF5
    // What is held in memory (shards whole, blocks), the least recently used first.
    struct Held {
        std::size_t shard = 0;
        std::uint64_t block = 0;
        bool isBlock = false;
    };
    std::list<Held> held_;
    std::size_t heldShards_ = 0;
    // Held pieces by block number: one per shard the block spans, as read (four
    // on shards of 20 documents, one on large shards).
    std::unordered_map<std::uint64_t, std::vector<std::unique_ptr<HeldBlock>>> blocks_;
    std::size_t heldBlocks_ = 0;  // pieces in blocks_
    std::uint64_t uses_ = 0;               // shard and block uses so far (lastUse)
    std::size_t evictLeastRecent(std::deque<std::size_t>& order);
    std::uint64_t memoryBytes_ = 0;
    std::vector<std::uint16_t> narrow_;  // read buffer for 16-bit shards
    std::vector<ShardChunks> chunks_;    // by shard, or empty
    std::map<std::size_t, BlockChunks> blockChunks_;  // of the shards read by the block most recently
    std::uint64_t blockChunkBytes_ = 0;               // their size, within options_.chunkListBytes
    ReadBuffer<std::byte> raw_;          // read buffer of the preads
    UniqueFd dirFd_;                     // the source directory, for the preads' openat (none: by path)
    std::unique_ptr<DocLengths> lengths_;  // the source's length index, when it has one
    std::uint64_t directReads_ = 0;
    std::uint64_t blockTokenReads_ = 0;
    bool checksummed_ = true;
    bool allChecked_ = false;
    std::uint64_t openings_ = 0;
};

}  // namespace kiln::data
