// HDF5 is called directly here, not through io's typed layer (hdf5_array.hpp): the loader's reads keep their
// dataspaces, chunk-cache and file-access property lists across every read and opening, where the layer's
// one-call reads would create them each time, on the path whose speed perf/bench_loader measures.
#include "kiln/data/source_reader.hpp"

#include "source_reader_parts.hpp"

#include "kiln/base/error.hpp"

#include <fmt/format.h>

#include <fcntl.h>

#include <algorithm>

namespace kiln::data {

namespace h5 = io::h5;

// Offsets are read in small aligned blocks and the last block is kept: a
// sequential scan needs one HDF5 read per document instead of two, and memory
// stays at one block per open shard.
constexpr std::uint64_t kOffsetBlock = 512;

namespace {

// Dataset access with a chunk cache of `cacheBytes`: 521 slots (a prime, as
// HDF5 advises); w0 = 1: evict fully read chunks first.
h5::Handle chunkCacheAccess(std::size_t cacheBytes) {
    h5::Handle access(KILN_H5(H5Pcreate(H5P_DATASET_ACCESS), "dataset access"));
    KILN_H5(H5Pset_chunk_cache(access, 521, cacheBytes, 1.0), "dataset access");
    return access;
}

h5::Handle openDataset(hid_t file, const char* name, hid_t access, const std::string& context) {
    h5::Handle set(H5Dopen2(file, name, access));
    if (set.valid()) return set;
    if (H5Lexists(file, name, H5P_DEFAULT) <= 0)
        throw InputError(fmt::format("{}: dataset /{} is missing", context, name), ErrorScope::ThisRank);
    return h5::Handle(KILN_H5(H5Dopen2(file, name, access), context));
}

// The chunk length of a 1-D dataset (what errors name chunks by); `otherwise` when not chunked.
std::uint64_t chunkLength(hid_t dataset, std::uint64_t otherwise, const std::string& context) {
    h5::Handle create(KILN_H5(H5Dget_create_plist(dataset), context));
    hsize_t dims[1] = {0};
    if (H5Pget_layout(create) != H5D_CHUNKED || H5Pget_chunk(create, 1, dims) != 1 || dims[0] == 0) return otherwise;
    return dims[0];
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
    : SourceReader(sourceDir, readManifest(sourceDir), options) {}

SourceReader::SourceReader(std::filesystem::path sourceDir, SourceManifest manifest, ReaderOptions options)
    : dir_(std::move(sourceDir)), options_(options), manifest_(std::move(manifest)) {
    h5::LibraryLock lock(h5::libraryMutex());
    h5::quietErrors();
    if (options_.readWithPreads) dirFd_ = UniqueFd(::open(dir_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (options_.useLengthIndex && std::filesystem::exists(dir_ / kDocLengthsName))
        lengths_ = std::make_unique<DocLengths>(dir_ / kDocLengthsName, manifest_);
    // Made once, not per opening: an opening is the loader's costliest step for small shards.
    fileAccess_ = h5::Handle(KILN_H5(H5Pcreate(H5P_FILE_ACCESS), dir_.string()));
    // Read only: no lock to take (one lock call less per opening; locks misbehave on some parallel file systems).
    KILN_H5(H5Pset_file_locking(fileAccess_, false, true), dir_.string());
    tokenAccess_ = chunkCacheAccess(options_.tokenCacheBytes);
    offsetAccess_ = chunkCacheAccess(options_.offsetCacheBytes);
    shards_.resize(manifest_.shards.size());
    if (!options_.checkShardsAtOpen) return;
    // Every rank opening the source meets the same problem: an error of all ranks.
    try {
        checkShards(0, shards_.size());
    } catch (const InputError& e) {
        throw InputError(e.what(), ErrorScope::AllRanks);
    }
    markAllChecked();
}

void SourceReader::checkShards(std::size_t begin, std::size_t end) {
    h5::LibraryLock lock(h5::libraryMutex());
    // Metadata only: nothing is kept open and no tokens are read (the stream opens what it needs).
    for (std::size_t i = begin; i < std::min(end, shards_.size()); ++i) {
        if (shards_[i]) continue;
        const auto shard = openFile(i, /*whole=*/false);
        if (readWhole(i) || readByBlock(i)) rememberChunks(i, *shard);  // the stream will read it with preads
    }
}

SourceReader::~SourceReader() {
    h5::LibraryLock lock(h5::libraryMutex());  // other threads call HDF5 too: close everything under the lock
    shards_.clear();
    blocks_.clear();
    held_.clear();
    fileAccess_.reset();
    tokenAccess_.reset();
    offsetAccess_.reset();
}

std::unique_ptr<SourceReader::OpenShard> SourceReader::openFile(std::size_t index, bool whole) {
    const std::string context = shardPath(index).string();
    auto shard = std::make_unique<OpenShard>();
    shard->file = h5::Handle(H5Fopen(context.c_str(), H5F_ACC_RDONLY, fileAccess_));
    if (!shard->file.valid()) {
        if (!std::filesystem::exists(shardPath(index)))
            throw InputError(fmt::format("{}: shard listed in the manifest is missing", context), ErrorScope::ThisRank);
        throw InputError(fmt::format("{}: cannot open the shard: the file is truncated or is not HDF5 ({} bytes on disk)",
                                     context, std::filesystem::file_size(shardPath(index))),
                         ErrorScope::ThisRank);
    }
    ++openings_;
    const std::uint64_t numDocs = manifest_.shards.numDocs(index), numTokens = manifest_.shards.numTokens(index);
    const auto mismatch = [&](const char* what, auto inFile, auto inManifest) {
        return InputError(fmt::format("{}: {} is {} in the shard but {} in {}; the source is inconsistent, prepare it again",
                                      context, what, inFile, inManifest, (dir_ / kManifestName).string()),
                          ErrorScope::ThisRank);
    };
    // The header once per job (the checks at start-up); later openings rely on
    // the dataset lengths below and on the chunks' checksums.
    if (!allChecked_) {
        const ShardHeader header = readShardHeader(shard->file, context);
        if (header.formatVersion < 2) checksummed_ = false;
        if (header.numDocs != numDocs) throw mismatch("n_docs", header.numDocs, numDocs);
        if (header.numTokens != numTokens) throw mismatch("n_tokens", header.numTokens, numTokens);
        if (header.tokensCrc != manifest_.shards.tokensCrc(index))
            throw mismatch("tokens_crc32", header.tokensCrc, manifest_.shards.tokensCrc(index));
        if (header.tokenizer.id != manifest_.tokenizer.id)
            throw mismatch("tokenizer_id", header.tokenizer.id, manifest_.tokenizer.id);
        if (header.tokenBits != manifest_.tokenBits) throw mismatch("token_bits", header.tokenBits, manifest_.tokenBits);
    }
    // Read whole: no chunk cache is needed.
    shard->tokens = openDataset(shard->file, "tokens", whole ? H5P_DEFAULT : hid_t{tokenAccess_}, context);
    shard->offsets = openDataset(shard->file, "doc_offsets", whole ? H5P_DEFAULT : hid_t{offsetAccess_}, context);
    shard->tokenSpace = h5::Handle(KILN_H5(H5Dget_space(shard->tokens), context));
    shard->offsetSpace = h5::Handle(KILN_H5(H5Dget_space(shard->offsets), context));
    hsize_t extent[1] = {0};
    KILN_H5(H5Sget_simple_extent_dims(shard->tokenSpace, extent, nullptr), context);
    if (extent[0] != numTokens) throw mismatch("the length of /tokens", extent[0], numTokens);
    KILN_H5(H5Sget_simple_extent_dims(shard->offsetSpace, extent, nullptr), context);
    if (extent[0] != numDocs + 1) throw mismatch("the length of /doc_offsets", extent[0], numDocs + 1);
    hsize_t one[1] = {1};
    shard->memSpace = h5::Handle(KILN_H5(H5Screate_simple(1, one, nullptr), context));
    return shard;
}

std::uint64_t SourceReader::wholeBytes(std::size_t index) const {
    return manifest_.shards.numTokens(index) * sizeof(std::uint32_t) +
           (manifest_.shards.numDocs(index) + 1) * sizeof(std::uint64_t);
}

// Evicts the least recently used shard of `order`, returning its index. A
// scan at eviction only (hits stay O(1)): a shuffle window revisits its
// shards in random order, where first-in-first-out would close shards still in use.
std::size_t SourceReader::evictLeastRecent(std::deque<std::size_t>& order) {
    auto oldest = order.begin();
    for (auto it = order.begin(); it != order.end(); ++it)
        if (shards_[*it]->lastUse < shards_[*oldest]->lastUse) oldest = it;
    const std::size_t index = *oldest;
    order.erase(oldest);
    shards_[index].reset();
    return index;
}

bool SourceReader::readWhole(std::size_t index) const {
    return wholeBytes(index) <= options_.wholeShardBytes && manifest_.shards.numDocs(index) <= options_.wholeShardDocs;
}

bool SourceReader::readByBlock(std::size_t index) const {
    const std::uint64_t docs = manifest_.shards.numDocs(index);
    if (options_.blockDocs == 0 || docs == 0) return false;
    // Small shards too: a window needs one block's documents of a shard, and a
    // shard that straddles two blocks would bring the other block's tokens,
    // evicted before that block's window comes (1.3x the tokens read on
    // shards of 27 documents); and a rank without a slice reads offsets only.
    const std::uint64_t blockTokens = manifest_.shards.numTokens(index) * std::min(options_.blockDocs, docs) / docs;
    return blockTokens * sizeof(std::uint32_t) <= options_.wholeShardBytes;
}

void SourceReader::makeRoom(std::uint64_t bytes, bool keepNewest) {
    // O(1) an eviction, not a scan of what is held (some 800 shards of 15 k
    // tokens in a default budget) at every reading of a shard.
    while (memoryBytes_ + bytes > options_.shardMemoryBytes && held_.size() > (keepNewest ? 1u : 0u)) {
        const Held oldest = held_.front();
        held_.pop_front();
        if (oldest.isBlock) {
            const auto it = blocks_.find(oldest.block);
            auto& pieces = it->second;
            const auto piece = std::find_if(pieces.begin(), pieces.end(), [&](const auto& p) { return p->shard == oldest.shard; });
            memoryBytes_ -= (*piece)->bytes();
            keepBuffers((*piece)->tokens, (*piece)->offsets);
            pieces.erase(piece);
            if (pieces.empty()) blocks_.erase(it);
            --heldBlocks_;
        } else {
            memoryBytes_ -= wholeBytes(oldest.shard);
            keepBuffers(shards_[oldest.shard]->tokenData, shards_[oldest.shard]->offsetData);
            shards_[oldest.shard].reset();
            --heldShards_;
        }
    }
}

// Two pairs at most: the next read takes what this eviction gave back, so
// more would only hold memory outside the budget.
void SourceReader::keepBuffers(ReadBuffer<std::uint32_t>& tokens, ReadBuffer<std::uint64_t>& offsets) {
    if (spareBuffers_.size() >= 2) return;
    tokens.clear();
    offsets.clear();
    spareBuffers_.emplace_back(std::move(tokens), std::move(offsets));
}

void SourceReader::takeBuffers(ReadBuffer<std::uint32_t>& tokens, ReadBuffer<std::uint64_t>& offsets) {
    if (spareBuffers_.empty()) return;
    tokens = std::move(spareBuffers_.back().first);
    offsets = std::move(spareBuffers_.back().second);
    spareBuffers_.pop_back();
}

SourceReader::HeldBlock* SourceReader::heldPiece(std::uint64_t doc) {
    if (blocks_.empty()) return nullptr;  // also without blocks (blockDocs = 0)
    const auto it = blocks_.find(doc / options_.blockDocs);
    if (it == blocks_.end()) return nullptr;
    for (const auto& piece : it->second)
        if (doc >= piece->sourceFirstDoc && doc - piece->sourceFirstDoc + 1 < piece->offsets.size()) {
            held_.splice(held_.end(), held_, piece->heldAt);
            return piece.get();
        }
    return nullptr;
}

SourceReader::HeldBlock& SourceReader::readBlock(std::size_t shard, std::uint64_t doc) {
    const std::uint64_t number = doc / options_.blockDocs;
    // The block's documents that lie in this shard (a block may straddle two).
    const std::uint64_t first = manifest_.shards.docStarts()[shard];
    const std::uint64_t from = std::max(number * options_.blockDocs, first) - first;
    const std::uint64_t to = std::min((number + 1) * options_.blockDocs, first + manifest_.shards.numDocs(shard)) - first;
    auto held = std::make_unique<HeldBlock>();
    // With a length index a block is read for its tokens only: planning reads no offsets.
    const BlockPart part = options_.blockTokensOnDemand && !lengths_ ? BlockPart::Offsets : BlockPart::Whole;
    // Offsets alone take no spare: its token buffer would be capacity held outside the budget.
    if (part == BlockPart::Whole) takeBuffers(held->tokens, held->offsets);
    held->shard = shard;
    held->firstDoc = from;
    held->sourceFirstDoc = first + from;
    held->offsets.resize(to - from + 1);
    if (!readBlockDirectly(shard, *held, part)) readBlockThroughHdf5(shard, *held, part);
    checkLengths(shard, held->sourceFirstDoc, held->offsets);
    makeRoom(held->bytes());
    memoryBytes_ += held->bytes();
    held->heldAt = held_.insert(held_.end(), Held{shard, number, true});
    ++heldBlocks_;
    return *blocks_[number].emplace_back(std::move(held));
}

std::size_t SourceReader::firstUnsoundOffset(std::span<const std::uint64_t> offsets, std::uint64_t numTokens) {
    for (std::size_t i = 1; i < offsets.size(); ++i)
        if (offsets[i] < offsets[i - 1] || offsets[i] > numTokens) return i;
    return offsets.size();
}

void SourceReader::readBlockThroughHdf5(std::size_t shard, HeldBlock& held, BlockPart part) {
    auto file = openFile(shard, /*whole=*/true);  // closed again at the end of this scope
    if (part != BlockPart::Tokens) {
        readFromFile(shard, *file, /*tokens=*/false, held.firstDoc, held.offsets.size(), held.offsets.data());
        if (const std::size_t i = firstUnsoundOffset(held.offsets, manifest_.shards.numTokens(shard)); i < held.offsets.size())
            throw InputError(fmt::format("{}: doc_offsets are corrupt around document {} ({} .. {})",
                                         shardPath(shard).string(), held.firstDoc + i - 1, held.offsets[i - 1],
                                         held.offsets[i]),
                             ErrorScope::ThisRank);
    }
    if (part != BlockPart::Offsets) {
        held.tokens.resize(held.offsets.back() - held.offsets.front());
        readFromFile(shard, *file, /*tokens=*/true, held.offsets.front(), held.tokens.size(), held.tokens.data());
        held.tokensRead = true;
        ++blockTokenReads_;
    }
    if (!forgetPlaces(shard)) noteChunkList(shard, *file);  // the shard's later blocks with preads
}

void SourceReader::readBlockTokens(std::size_t shard, HeldBlock& held) {
    const std::uint64_t before = held.bytes();
    if (!readBlockDirectly(shard, held, BlockPart::Tokens)) readBlockThroughHdf5(shard, held, BlockPart::Tokens);
    // The block is the newest held (its document was just looked up): room is made from older ones.
    makeRoom(held.bytes() - before, /*keepNewest=*/true);
    memoryBytes_ += held.bytes() - before;
}

SourceReader::OpenShard& SourceReader::open(std::size_t index) {
    if (OpenShard* shard = shards_[index].get()) {
        shard->lastUse = ++uses_;
        if (shard->inMemory) held_.splice(held_.end(), held_, shard->heldAt);
        return *shard;
    }
    const bool whole = readWhole(index);
    auto shard = whole ? readWholeShard(index) : openFile(index, /*whole=*/false);
    if (whole) {
        // A shuffle window touches hundreds of small shards; holding them costs
        // memory in proportion to their tokens, not a file handle each.
        const std::uint64_t bytes = wholeBytes(index);
        makeRoom(bytes);
        shard->heldAt = held_.insert(held_.end(), Held{index, 0, false});
        ++heldShards_;
        memoryBytes_ += bytes;
    } else {
        if (openOrder_.size() >= options_.maxOpenShards) evictLeastRecent(openOrder_);
        openOrder_.push_back(index);
    }
    shard->lastUse = ++uses_;
    shards_[index] = std::move(shard);
    return *shards_[index];
}

std::unique_ptr<SourceReader::OpenShard> SourceReader::readWholeShard(std::size_t index) {
    auto shard = std::make_unique<OpenShard>();
    shard->inMemory = true;
    takeBuffers(shard->tokenData, shard->offsetData);
    shard->tokenData.resize(manifest_.shards.numTokens(index));
    shard->offsetData.resize(manifest_.shards.numDocs(index) + 1);
    if (readDirectly(index, *shard)) return shard;
    // Through HDF5 (every chunk's checksum verified once), the file closed at the end of this scope.
    auto file = openFile(index, /*whole=*/true);
    readFromFile(index, *file, /*tokens=*/true, 0, shard->tokenData.size(), shard->tokenData.data());
    readFromFile(index, *file, /*tokens=*/false, 0, shard->offsetData.size(), shard->offsetData.data());
    forgetPlaces(index);
    return shard;
}

DocumentSpan SourceReader::locate(std::uint64_t doc) {
    Location where;
    return locate(doc, where);
}

std::uint64_t SourceReader::documentLength(std::uint64_t doc) {
    if (!lengths_) return locate(doc).length();
    h5::LibraryLock lock(h5::libraryMutex());  // the reader's one lock: its callers may be several threads
    return lengths_->length(doc);
}

DocumentSpan SourceReader::locate(std::uint64_t doc, Location& where) {
    h5::LibraryLock lock(h5::libraryMutex());
    where = {};
    if (doc >= numDocuments())
        throw std::out_of_range(fmt::format("document {} of source {} (it has {})", doc, manifest_.source, numDocuments()));
    HeldBlock* held = heldPiece(doc);
    const std::size_t shard = held ? held->shard : manifest_.shards.shardOf(doc);
    if (held || readByBlock(shard)) {
        if (!held) held = &readBlock(shard, doc);
        where.block = held;
        const std::uint64_t i = doc - held->sourceFirstDoc;
        return {shard, held->offsets[i], held->offsets[i + 1]};
    }
    const std::uint64_t local = doc - manifest_.shards.docStarts()[shard];
    OpenShard& s = *(where.shard = &open(shard));
    if (local < s.offsetBlockStart || local + 1 >= s.offsetBlockStart + s.offsetBlock.size()) {
        s.offsetBlockStart = local - local % kOffsetBlock;
        s.offsetBlock.resize(std::min(kOffsetBlock + 1, manifest_.shards.numDocs(shard) + 1 - s.offsetBlockStart));
        readShardOffsets(shard, s.offsetBlockStart, s.offsetBlock.size(), s.offsetBlock.data());
    }
    const std::uint64_t bounds[2] = {s.offsetBlock[local - s.offsetBlockStart], s.offsetBlock[local + 1 - s.offsetBlockStart]};
    if (bounds[1] < bounds[0] || bounds[1] > manifest_.shards.numTokens(shard))
        throw InputError(fmt::format("{}: doc_offsets are corrupt around document {} ({} .. {})", shardPath(shard).string(),
                                     local, bounds[0], bounds[1]),
                         ErrorScope::ThisRank);
    checkLengths(shard, doc, bounds);
    return {shard, bounds[0], bounds[1]};
}

void SourceReader::checkLengths(std::size_t shard, std::uint64_t firstDoc, std::span<const std::uint64_t> offsets) {
    // Every rank planned from the index; the rank that reads a document has
    // its offsets checked against it here, before any of its tokens is used.
    if (!lengths_) return;
    for (std::size_t i = 0; i + 1 < offsets.size(); ++i) {
        const std::uint64_t doc = firstDoc + i, inShard = offsets[i + 1] - offsets[i];
        if (lengths_->length(doc) == inShard) continue;
        throw InputError(fmt::format("{}: document {} has {} tokens there but {} in {} (document {} of the shard): the "
                                     "length index does not belong to this preparation of the source; write it again "
                                     "with kiln inspect {} --write-lengths",
                                     lengths_->path().string(), doc, lengths_->length(doc), inShard,
                                     shardPath(shard).string(), doc - manifest_.shards.docStarts()[shard], dir_.string()),
                         ErrorScope::ThisRank);
    }
}

namespace {

// Values [at, at + count) of a shard held whole.
template <typename T>
void copyHeld(std::span<const T> held, std::uint64_t at, std::uint64_t count, T* out, const char* what,
              std::size_t shard) {
    if (at + count > held.size())
        throw std::out_of_range(fmt::format("{} [{}, {}) of shard {} of {}", what, at, at + count, shard, held.size()));
    std::copy_n(held.begin() + static_cast<std::ptrdiff_t>(at), count, out);
}

}  // namespace

void SourceReader::readTokens(std::uint64_t doc, std::uint64_t begin, std::uint64_t count, std::uint32_t* out) {
    h5::LibraryLock lock(h5::libraryMutex());  // held from the lookup to the copy: the block cannot be evicted between
    Location where;
    const DocumentSpan span = locate(doc, where);
    if (begin + count > span.length())
        throw std::out_of_range(fmt::format("tokens [{}, {}) of document {} of length {}", begin, begin + count, doc,
                                            span.length()));
    if (HeldBlock* held = where.block) {
        if (!held->tokensRead) readBlockTokens(span.shard, *held);
        std::copy_n(held->tokens.begin() + static_cast<std::ptrdiff_t>(span.begin + begin - held->offsets.front()), count,
                    out);
    } else if (where.shard->inMemory) {
        copyHeld<std::uint32_t>(where.shard->tokenData, span.begin + begin, count, out, "tokens", span.shard);
    } else {
        readFromFile(span.shard, *where.shard, /*tokens=*/true, span.begin + begin, count, out);
    }
    // An id outside the vocabulary would index past the embedding: never hand it on.
    // A branch-free test first (it vectorises: it was a tenth of the loader's time
    // as a loop that could throw at every token); the offender is looked for only then.
    const std::uint32_t vocab = manifest_.tokenizer.vocabSize;
    std::uint32_t outside = 0;
    for (std::uint64_t i = 0; i < count; ++i) outside |= static_cast<std::uint32_t>(out[i] >= vocab);
    if (outside == 0) return;
    const auto* bad = std::find_if(out, out + count, [&](std::uint32_t id) { return id >= vocab; });
    const auto i = static_cast<std::uint64_t>(bad - out);
    throw InputError(fmt::format("source {}: {}: document {} (number {} of the shard), token {} is id {}, outside "
                                 "the vocabulary of {}; the shard is corrupt.\n  Check it with kiln inspect {} "
                                 "and prepare the source again.",
                                 manifest_.source, shardPath(span.shard).string(), doc,
                                 doc - manifest_.shards.docStarts()[span.shard], begin + i, out[i], vocab, dir_.string(),
                                 dir_.string()),
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
    std::vector<std::uint32_t> tokens(documentLength(doc));
    readTokens(doc, 0, tokens.size(), tokens.data());
    return tokens;
}

void SourceReader::readShardTokens(std::size_t shard, std::uint64_t at, std::uint64_t count, std::uint32_t* out) {
    h5::LibraryLock lock(h5::libraryMutex());
    OpenShard& s = open(shard);
    if (!s.inMemory) return readFromFile(shard, s, /*tokens=*/true, at, count, out);
    copyHeld<std::uint32_t>(s.tokenData, at, count, out, "tokens", shard);
}

void SourceReader::readShardOffsets(std::size_t shard, std::uint64_t at, std::uint64_t count, std::uint64_t* out) {
    h5::LibraryLock lock(h5::libraryMutex());
    OpenShard& s = open(shard);
    if (!s.inMemory) return readFromFile(shard, s, /*tokens=*/false, at, count, out);
    copyHeld<std::uint64_t>(s.offsetData, at, count, out, "offsets", shard);
}

void SourceReader::readFromFile(std::size_t shard, OpenShard& s, bool tokens, std::uint64_t at, std::uint64_t count,
                                void* into) {
    const std::string context = shardPath(shard).string();
    if (!tokens) {
        auto* out = static_cast<std::uint64_t*>(into);
        try {
            readRange(s.offsets, s.offsetSpace, s.memSpace, H5T_NATIVE_UINT64, at, count, out, context);
        } catch (const LibraryError& e) {
            const std::uint64_t total = manifest_.shards.numDocs(shard) + 1,
                                chunk = chunkLength(s.offsets, kOffsetChunk, context);
            std::vector<std::uint64_t> one(chunk);
            corruptRead(manifest_.source, dir_, context, "document offsets", at, count, chunk, e.what(),
                        [&](std::uint64_t k) {
                            const std::uint64_t from = k * chunk, n = std::min(chunk, total - from);
                            readRange(s.offsets, s.offsetSpace, s.memSpace, H5T_NATIVE_UINT64, from, n, one.data(), context);
                        });
        }
        return;
    }
    auto* out = static_cast<std::uint32_t*>(into);
    try {
        if (manifest_.tokenBits == 32) {
            readRange(s.tokens, s.tokenSpace, s.memSpace, H5T_NATIVE_UINT32, at, count, out, context);
            return;
        }
        // Read at the stored width and widen here: cheaper than HDF5's type conversion.
        narrow_.resize(count);
        readRange(s.tokens, s.tokenSpace, s.memSpace, H5T_NATIVE_UINT16, at, count, narrow_.data(), context);
    } catch (const LibraryError& e) {
        const std::uint64_t total = manifest_.shards.numTokens(shard), chunk = chunkLength(s.tokens, kTokenChunk, context);
        std::vector<std::uint32_t> one(chunk);
        corruptRead(manifest_.source, dir_, context, "tokens", at, count, chunk, e.what(), [&](std::uint64_t k) {
            const std::uint64_t from = k * chunk, n = std::min(chunk, total - from);
            readRange(s.tokens, s.tokenSpace, s.memSpace, H5T_NATIVE_UINT32, from, n, one.data(), context);
        });
    }
    std::copy(narrow_.begin(), narrow_.end(), out);
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
