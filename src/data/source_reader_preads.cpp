// The reads of a SourceReader that bypass HDF5's opening: where the shards'
// chunks lie (learnt at the start-up check or at a shard's second block) and
// the preads at those places (shard_chunks.hpp says why and what is verified).
#include "kiln/data/source_reader.hpp"

#include "source_reader_parts.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <optional>

namespace kiln::data {

namespace {

// Opens shard file `name` of the source directory `dir` (through `dirFd` when
// open: a path walk of one name, not of the whole path, at each of the
// stream's openings) for reading, runs `read(fd)` and closes it again; false
// when it cannot be opened (HDF5's opening then says what is wrong) or `read` fails.
template <typename Read>
bool readFile(int dirFd, const std::filesystem::path& dir, const std::string& name, Read&& read) {
    // Owned: closed on every way out of `read`, exceptions (allocation) included.
    const UniqueFd fd(dirFd >= 0 ? ::openat(dirFd, name.c_str(), O_RDONLY | O_CLOEXEC)
                                 : ::open((dir / name).c_str(), O_RDONLY | O_CLOEXEC));
    return fd.get() >= 0 && read(fd.get());
}

}  // namespace

bool SourceReader::forgetPlaces(std::size_t shard) {
    // Called after HDF5 read what a direct read may have refused: the places or
    // this kiln's checksum disagree with HDF5 somewhere. HDF5 alone from now.
    // (Before every shard is checked the table is not used: nothing was refused.)
    if (allChecked_ && shard < chunks_.size() && chunks_[shard].known()) {
        chunks_ = {};
        return true;
    }
    if (const auto listed = blockChunks_.find(shard); listed != blockChunks_.end() && listed->second.known()) {
        blockChunkBytes_ -= listed->second.bytes();
        blockChunks_.erase(listed);
        return true;
    }
    return false;
}

void SourceReader::noteChunkList(std::size_t shard, const OpenShard& file) {
    if (!options_.readWithPreads) return;
    // At the shard's second block, not its first: looking a chunk list up costs
    // about as much as an opening (a B-tree lookup a chunk), and a stream that
    // meets a shard only once (a short run, a shard of few blocks) gains nothing.
    BlockChunks places{{}, {}, ++uses_};
    if (const auto seen = blockChunks_.find(shard); seen != blockChunks_.end()) {  // an empty entry
        blockChunkBytes_ -= seen->second.bytes();
        blockChunks_.erase(seen);
        const std::string context = shardPath(shard).string();
        auto tokens = chunkList(file.tokens, manifest_.shards.numTokens(shard), manifest_.tokenBits / 8, context);
        auto offsets = chunkList(file.offsets, manifest_.shards.numDocs(shard) + 1, sizeof(std::uint64_t), context);
        if (!tokens || !offsets) return;
        places.tokens = std::move(*tokens);
        places.offsets = std::move(*offsets);
    }
    const std::uint64_t bytes = places.bytes();
    if (bytes > options_.chunkListBytes) return;
    while (blockChunkBytes_ + bytes > options_.chunkListBytes) {
        auto oldest = blockChunks_.begin();
        for (auto it = blockChunks_.begin(); it != blockChunks_.end(); ++it)
            if (it->second.lastUse < oldest->second.lastUse) oldest = it;
        blockChunkBytes_ -= oldest->second.bytes();
        blockChunks_.erase(oldest);
    }
    blockChunkBytes_ += bytes;
    blockChunks_.emplace(shard, std::move(places));
}

bool SourceReader::readBlockDirectly(std::size_t shard, HeldBlock& held, BlockPart part) {
    std::optional<std::pair<ChunkPlaces, ChunkPlaces>> places;  // tokens, offsets
    if (allChecked_ && shard < chunks_.size() && chunks_[shard].known()) {
        places.emplace(chunks_[shard].tokens, chunks_[shard].offsets);
    } else if (const auto listed = blockChunks_.find(shard); listed != blockChunks_.end() && listed->second.known()) {
        listed->second.lastUse = ++uses_;
        places.emplace(listed->second.tokens, listed->second.offsets);
    }
    if (!places) return false;
    const bool read = readFile(dirFd_.get(), dir_, manifest_.shards.file(shard), [&](int fd) {
        ++openings_;
        if (part != BlockPart::Tokens &&
            (!readChunks(fd, places->second, sizeof(std::uint64_t), held.firstDoc, held.offsets.size(),
                         held.offsets.data(), raw_) ||
             firstUnsoundOffset(held.offsets, manifest_.shards.numTokens(shard)) != held.offsets.size()))
            return false;
        if (part == BlockPart::Offsets) return true;
        held.tokens.resize(held.offsets.back() - held.offsets.front());
        return readChunks(fd, places->first, manifest_.tokenBits / 8, held.offsets.front(), held.tokens.size(),
                          held.tokens.data(), raw_);
    });
    if (!read) return false;
    ++directReads_;
    if (part != BlockPart::Offsets) {
        held.tokensRead = true;
        ++blockTokenReads_;
    }
    return true;
}

bool SourceReader::readDirectly(std::size_t index, OpenShard& shard) {
    if (!allChecked_ || index >= chunks_.size() || !chunks_[index].known()) return false;
    const ShardChunks& places = chunks_[index];
    const bool read = readFile(dirFd_.get(), dir_, manifest_.shards.file(index), [&](int fd) {
        ++openings_;
        return readChunks(fd, places.tokens, manifest_.tokenBits / 8, 0, shard.tokenData.size(), shard.tokenData.data(),
                          raw_) &&
               readChunks(fd, places.offsets, sizeof(std::uint64_t), 0, shard.offsetData.size(), shard.offsetData.data(),
                          raw_);
    });
    // The bounds HDF5's reading checks through the dataset lengths.
    if (!read || shard.offsetData.front() != 0 || shard.offsetData.back() != shard.tokenData.size()) return false;
    ++directReads_;
    return true;
}

void SourceReader::rememberChunks(std::size_t index, const OpenShard& shard) {
    if (!options_.readWithPreads || shards_.size() * sizeof(ShardChunks) > options_.chunkTableBytes) return;
    const std::string context = shardPath(index).string();
    const auto tokens = contiguousChunks(shard.tokens, manifest_.shards.numTokens(index),
                                         static_cast<std::size_t>(manifest_.tokenBits / 8), context);
    const auto offsets = contiguousChunks(shard.offsets, manifest_.shards.numDocs(index) + 1, sizeof(std::uint64_t), context);
    if (!tokens || !offsets) return;
    if (chunks_.empty()) chunks_.resize(shards_.size());
    chunks_[index] = {*tokens, *offsets};
}

void SourceReader::markAllChecked() {
    allChecked_ = true;
    // Kept only where it spares most of the openings: a source whose shards
    // mostly have chunks not back to back (large shards written in pieces) reads
    // them through the list cache instead, and the table would cost 32 bytes a shard.
    const auto known = std::count_if(chunks_.begin(), chunks_.end(), [](const ShardChunks& c) { return c.known(); });
    if (static_cast<std::size_t>(known) * 2 < chunks_.size()) chunks_ = {};
}

void SourceReader::setShardChunks(std::vector<ShardChunks> chunks) {
    if (!chunks.empty() && chunks.size() != shards_.size())
        throw std::invalid_argument(fmt::format("{} shard chunk places for the {} shards of {}", chunks.size(),
                                                shards_.size(), dir_.string()));
    chunks_ = std::move(chunks);
}

}  // namespace kiln::data
