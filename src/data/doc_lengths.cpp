#include "kiln/data/doc_lengths.hpp"

#include "kiln/base/error.hpp"
#include "kiln/data/shard_chunks.hpp"
#include "kiln/comm/error_agreement.hpp"
#include "kiln/comm/mpi_check.hpp"
#include "kiln/io/atomic_file.hpp"
#include "kiln/io/parallel_file.hpp"
#include "kiln/io/hdf5.hpp"
#include "kiln/io/hdf5_array.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <memory>
#include <span>

namespace kiln::data {

namespace h5 = io::h5;

namespace {

constexpr const char* kLengthsSet = "doc_lengths";
constexpr const char* kSumsSet = "doc_lengths_fletcher32";
// Lengths written at a time: 256 groups, 1 MiB.
constexpr std::uint64_t kWriteGroups = 256;
// Offsets read from a shard at a time.
constexpr std::uint64_t kOffsetPiece = 1u << 20;

std::uint64_t groupsOf(std::uint64_t docs) { return (docs + kLengthGroup - 1) / kLengthGroup; }

std::uint32_t groupSum(const std::uint32_t* lengths, std::uint64_t count) {
    // The bytes as stored: little-endian.
    if constexpr (std::endian::native == std::endian::little)
        return fletcher32(std::as_bytes(std::span(lengths, count)));
    std::vector<std::uint32_t> stored(lengths, lengths + count);
    for (auto& v : stored) v = __builtin_bswap32(v);
    return fletcher32(std::as_bytes(std::span(stored)));
}

h5::Handle createContiguous(hid_t file, const char* name, std::uint64_t length, const std::string& context) {
    // Placed at creation: its offset is known and stays (what readers pread at).
    return h5::createArray<std::uint32_t>(file, name, {length}, context, h5::Storage::ContiguousAllocated);
}

// Independent writes (every rank its own range, in its own pieces).
void writeRange(hid_t set, std::uint64_t at, const std::vector<std::uint32_t>& values, const std::string& context) {
    if (values.empty()) return;
    h5::LibraryLock lock(h5::libraryMutex());
    h5::writeBlock(set, {at}, {values.size()}, values.data(), context);
}

// Calls `add(length)` for every document of `shard`, in order, checking its
// offsets: they start at 0, never decrease and end at its token count.
template <typename Add>
void forEachLength(const LengthsShard& shard, Add&& add) {
    const std::string context = shard.file.string();
    h5::LibraryLock lock(h5::libraryMutex());
    h5::Handle file = h5::openReadOnly(context);
    if (!file.valid()) throw InputError(fmt::format("{}: cannot open the shard to list its documents' lengths", context));
    h5::Handle set = h5::openDataset(file, "doc_offsets", context);
    const std::uint64_t entries = h5::extent1d(set, context);
    if (entries != shard.numDocs + 1)
        throw InputError(fmt::format("{}: /doc_offsets holds {} entries, the manifest says {} documents", context, entries,
                                     shard.numDocs));
    std::vector<std::uint64_t> offsets;
    std::uint64_t previous = 0;
    for (std::uint64_t at = 0; at < entries; at += kOffsetPiece) {
        const std::uint64_t n = std::min(kOffsetPiece, entries - at);
        offsets = h5::readBlock<std::uint64_t>(set, {at}, {n}, context);
        for (std::uint64_t i = 0; i < n; ++i) {
            const std::uint64_t doc = at + i;
            if (doc == 0) {
                if (offsets[i] != 0) throw InputError(fmt::format("{}: doc_offsets[0] is {}, not 0", context, offsets[i]));
            } else {
                if (offsets[i] < previous || offsets[i] - previous > std::numeric_limits<std::uint32_t>::max())
                    throw InputError(fmt::format("{}: doc_offsets are unsound at document {} ({} .. {})", context, doc - 1,
                                                 previous, offsets[i]));
                add(static_cast<std::uint32_t>(offsets[i] - previous));
            }
            previous = offsets[i];
        }
    }
    if (previous != shard.numTokens)
        throw InputError(fmt::format("{}: the last doc_offset is {}, the manifest says {} tokens", context, previous,
                                     shard.numTokens));
}

// One rank's lengths, documents [first, ...) of the source, placed as they
// come: the lengths in pieces, and the checksums of the groups that start in
// the rank's range (the group it starts inside belongs to a rank before it).
class RankLengths {
public:
    RankLengths(hid_t lengths, hid_t sums, std::uint64_t first, std::uint64_t total, std::string context)
        : lengths_(lengths), sums_(sums), written_(first), position_(first), total_(total),
          firstOwned_(groupsOf(first)), context_(std::move(context)) {}

    void add(std::uint32_t length) {
        if (head_.size() < kLengthGroup - 1) head_.push_back(length);
        pending_.push_back(length);
        if (position_ % kLengthGroup == 0) owning_ = true;
        if (owning_) {
            group_.push_back(length);
            if (group_.size() == kLengthGroup) closeGroup();
        }
        ++position_;
        if (pending_.size() == kWriteGroups * kLengthGroup) {
            writeRange(lengths_, written_, pending_, context_);
            written_ += pending_.size();
            pending_.clear();
        }
    }
    // Its lengths written; the source's last group closed if it ends here.
    void finishLengths() {
        writeRange(lengths_, written_, pending_, context_);
        written_ += pending_.size();
        pending_.clear();
        if (position_ == total_ && !group_.empty()) closeGroup();
    }
    std::uint64_t end() const { return position_; }
    // Its first lengths, for the rank before (fewer than a group: all it may need).
    const std::vector<std::uint32_t>& head() const { return head_; }
    // Lengths the group it ends inside still needs (0: none open); the source's last group is short.
    std::uint64_t missing() const {
        if (group_.empty()) return 0;
        return std::min(kLengthGroup, total_ - (position_ - group_.size())) - group_.size();
    }
    // The open group completed from the heads of the ranks after this one.
    void completeGroup(const std::vector<std::uint32_t>& after) {
        group_.insert(group_.end(), after.begin(), after.end());
        closeGroup();
    }
    void finishSums() {
        writeRange(sums_, firstOwned_, groupSums_, context_);
        firstOwned_ += groupSums_.size();
        groupSums_.clear();
    }

private:
    void closeGroup() {
        groupSums_.push_back(groupSum(group_.data(), group_.size()));
        group_.clear();
        if (groupSums_.size() == kWriteGroups) finishSums();
    }

    hid_t lengths_, sums_;
    std::uint64_t written_, position_, total_, firstOwned_;
    std::string context_;
    bool owning_ = false;
    std::vector<std::uint32_t> head_, pending_, group_, groupSums_;
};

// The file being written: by all ranks of `comm` through MPI-IO, or by this
// process alone (MPI_COMM_NULL); either way under a temporary name until commit().
class LengthsFile {
public:
    LengthsFile(MPI_Comm comm, const std::filesystem::path& path) : path_(path) {
        if (comm != MPI_COMM_NULL) {
            parallel_ = std::make_unique<io::ParallelFileWriter>(comm, path.string());
            return;
        }
        h5::LibraryLock lock(h5::libraryMutex());
        h5::quietErrors();
        temporary_ = io::temporarySibling(path);
        serial_ = h5::createFile(temporary_.string(), temporary_.string());
    }
    ~LengthsFile() {
        if (!serial_.valid()) return;
        h5::LibraryLock lock(h5::libraryMutex());
        serial_.reset();
        std::error_code ignored;
        std::filesystem::remove(temporary_, ignored);
    }
    hid_t id() const { return parallel_ ? parallel_->file() : serial_.id(); }
    void commit() {
        if (parallel_) return parallel_->commit();
        {
            h5::LibraryLock lock(h5::libraryMutex());
            h5::flush(serial_, temporary_.string());
            serial_.reset();
        }
        io::commitTemporary(temporary_, path_);
    }

private:
    std::filesystem::path path_, temporary_;
    std::unique_ptr<io::ParallelFileWriter> parallel_;
    h5::Handle serial_;
};

[[noreturn]] void unsound(const std::filesystem::path& path, const std::string& what) {
    throw InputError(fmt::format("{}: {}; write it again with kiln inspect {} --write-lengths (or remove it: the source "
                                 "is then planned from its shards)",
                                 path.string(), what, path.parent_path().string()));
}

}  // namespace

void writeDocLengths(MPI_Comm comm, const std::filesystem::path& path, const LengthsTotals& totals,
                     const std::vector<LengthsShard>& shards, std::uint64_t firstDoc) {
    if (totals.numDocs == 0)
        throw InputError(fmt::format("{}: a source without documents has no lengths to write", path.string()));
    LengthsFile file(comm, path);
    const std::string context = path.string();
    h5::Handle lengths, sums;
    {
        h5::LibraryLock lock(h5::libraryMutex());
        h5::writeAttribute(file.id(), "format", std::string(kDocLengthsFormat));
        h5::writeAttribute(file.id(), "format_version", kDocLengthsVersion);
        h5::writeAttribute(file.id(), "source", totals.source);
        h5::writeAttribute(file.id(), "n_docs", totals.numDocs);
        h5::writeAttribute(file.id(), "n_tokens", totals.numTokens);
        h5::writeAttribute(file.id(), "group", kLengthGroup);
        lengths = createContiguous(file.id(), kLengthsSet, totals.numDocs, context);
        sums = createContiguous(file.id(), kSumsSet, groupsOf(totals.numDocs), context);
    }
    RankLengths mine(lengths, sums, firstDoc, totals.numDocs, context);
    comm::throwFirstError(comm, comm::problemOf([&] {
        for (const auto& shard : shards) forEachLength(shard, [&](std::uint32_t length) { mine.add(length); });
        mine.finishLengths();
    }));
    std::string problem;
    if (comm == MPI_COMM_NULL) {
        if (mine.end() != totals.numDocs)
            problem = fmt::format("{}: the shards hold {} documents, the manifest {}", context, mine.end(), totals.numDocs);
    } else {
        // The next ranks' first lengths complete the group this rank ends inside.
        int size = 1, rank = 0;
        KILN_MPI(MPI_Comm_size(comm, &size));
        KILN_MPI(MPI_Comm_rank(comm, &rank));
        std::vector<std::uint32_t> heads(static_cast<std::size_t>(size) * kLengthGroup);
        std::vector<std::uint32_t> head(kLengthGroup);
        head[0] = static_cast<std::uint32_t>(mine.head().size());
        std::copy(mine.head().begin(), mine.head().end(), head.begin() + 1);
        KILN_MPI(MPI_Allgather(head.data(), kLengthGroup, MPI_UINT32_T, heads.data(), kLengthGroup, MPI_UINT32_T, comm));
        std::vector<std::uint32_t> after;
        for (int r = rank + 1; r < size && after.size() < mine.missing(); ++r) {
            const std::uint32_t* h = heads.data() + static_cast<std::size_t>(r) * kLengthGroup;
            after.insert(after.end(), h + 1, h + 1 + std::min<std::uint64_t>(h[0], mine.missing() - after.size()));
        }
        if (after.size() < mine.missing())
            problem = fmt::format("{}: the ranks' shards hold fewer documents than the source's {}", context, totals.numDocs);
        else if (mine.missing() > 0)
            problem = comm::problemOf([&] { mine.completeGroup(after); });
    }
    if (problem.empty()) problem = comm::problemOf([&] { mine.finishSums(); });
    comm::throwFirstError(comm, problem);
    lengths.reset();
    sums.reset();
    file.commit();
}

void writeDocLengths(const std::filesystem::path& sourceDir, const SourceManifest& manifest) {
    std::vector<LengthsShard> shards;
    for (std::size_t i = 0; i < manifest.shards.size(); ++i)
        shards.push_back({sourceDir / manifest.shards.file(i), manifest.shards.numDocs(i), manifest.shards.numTokens(i)});
    writeDocLengths(MPI_COMM_NULL, sourceDir / kDocLengthsName, {manifest.source, manifest.numDocs(), manifest.numTokens()},
                    shards, 0);
}

DocLengths::DocLengths(const std::filesystem::path& path, const SourceManifest& manifest)
    : path_(path), numDocs_(manifest.numDocs()) {
    h5::LibraryLock lock(h5::libraryMutex());
    h5::quietErrors();
    const std::string context = path.string();
    {
        h5::Handle file = h5::openReadOnly(context);
        if (!file.valid()) unsound(path, "cannot open the length index (truncated or not HDF5)");
        const std::string format = h5::hasAttribute(file, "format") ? h5::readStringAttribute(file, "format", context) : "";
        if (format != kDocLengthsFormat)
            unsound(path, fmt::format("not a kiln length index (format '{}', expected '{}')", format, kDocLengthsFormat));
        if (const auto v = h5::readIntAttribute(file, "format_version", context); v != kDocLengthsVersion)
            unsound(path, fmt::format("length index version {}, this kiln reads version {}", v, kDocLengthsVersion));
        const std::string source = h5::readStringAttribute(file, "source", context);
        const std::uint64_t docs = h5::readUintAttribute(file, "n_docs", context);
        const std::uint64_t tokens = h5::readUintAttribute(file, "n_tokens", context);
        if (source != manifest.source || docs != manifest.numDocs() || tokens != manifest.numTokens())
            unsound(path, fmt::format("it lists {} documents and {} tokens of source '{}', the manifest {} and {} of '{}': it "
                                      "belongs to another preparation",
                                      docs, tokens, source, manifest.numDocs(), manifest.numTokens(), manifest.source));
        if (h5::readUintAttribute(file, "group", context) != kLengthGroup)
            unsound(path, fmt::format("groups of {} lengths, this kiln reads groups of {}",
                                      h5::readUintAttribute(file, "group", context), kLengthGroup));
        const auto placeOf = [&](const char* name, std::uint64_t length) -> std::uint64_t {
            h5::Handle set = h5::openDataset(file, name, context);
            if (h5::extent1d(set, context) != length || !h5::storedAs(set, h5::fileType<std::uint32_t>(), context))
                unsound(path, fmt::format("/{} is not {} little-endian uint32 values", name, length));
            const auto at = h5::byteOffset(file, set, context);
            if (!at) unsound(path, fmt::format("/{} is not stored contiguously", name));
            return *at;
        };
        lengthsAt_ = placeOf(kLengthsSet, numDocs_);
        sumsAt_ = placeOf(kSumsSet, groupsOf(numDocs_));
    }
    fd_ = UniqueFd(::open(context.c_str(), O_RDONLY | O_CLOEXEC));
    struct stat st {};
    if (fd_.get() < 0 || ::fstat(fd_.get(), &st) != 0) unsound(path, "cannot open the length index for reading");
    // Groups are read at random places: the kernel's read-ahead, which guesses
    // sequential reads, cost more than the reads themselves (3x the preads' time).
    ::posix_fadvise(fd_.get(), 0, 0, POSIX_FADV_RANDOM);
    const auto size = static_cast<std::uint64_t>(st.st_size);
    if (lengthsAt_ + 4 * numDocs_ > size || sumsAt_ + 4 * groupsOf(numDocs_) > size)
        unsound(path, fmt::format("the file is truncated ({} bytes)", size));
}

void DocLengths::readAt(std::uint64_t at, void* into, std::size_t bytes, std::uint64_t g) {
    if (!preadFully(fd_.get(), into, bytes, at))
        unsound(path_, fmt::format("cannot read the lengths of documents {} .. {}", g * kLengthGroup,
                                   std::min(numDocs_, (g + 1) * kLengthGroup) - 1));
}

std::uint32_t DocLengths::storedSum(std::uint64_t g) {
    if (sumPages_.empty()) {
        sumPages_.resize(kCachedSumPages * kLengthGroup);
        sumPageOf_.assign(kCachedSumPages, ~std::uint64_t{0});
    }
    const std::uint64_t page = g / kLengthGroup;
    const std::size_t slot = page % kCachedSumPages;
    std::uint32_t* sums = sumPages_.data() + slot * kLengthGroup;
    if (sumPageOf_[slot] != page) {
        sumPageOf_[slot] = ~std::uint64_t{0};
        const std::uint64_t count = std::min(kLengthGroup, groupsOf(numDocs_) - page * kLengthGroup);
        readAt(sumsAt_ + 4 * page * kLengthGroup, sums, 4 * count, g);
        sumPageOf_[slot] = page;
    }
    std::uint32_t stored = sums[g % kLengthGroup];
    if constexpr (std::endian::native != std::endian::little) stored = __builtin_bswap32(stored);
    return stored;
}

void DocLengths::readGroup(std::uint64_t g, std::uint32_t* out, std::uint64_t count) {
    readAt(lengthsAt_ + 4 * g * kLengthGroup, out, 4 * count, g);
    const std::uint32_t sum = fletcher32(std::as_bytes(std::span(out, count)));  // as stored, before any swap
    if (sum != storedSum(g))
        unsound(path_, fmt::format("the lengths of documents {} .. {} fail their checksum: the file is corrupt",
                                   g * kLengthGroup, g * kLengthGroup + count - 1));
    if constexpr (std::endian::native != std::endian::little)
        for (std::uint64_t i = 0; i < count; ++i) out[i] = __builtin_bswap32(out[i]);
    ++groupReads_;
}

const std::uint32_t* DocLengths::group(std::uint64_t g) {
    if (slots_.empty()) {
        slots_.resize(kSets * kWays * kLengthGroup);
        slotGroup_.assign(kSets * kWays, ~std::uint64_t{0});
        nextWay_.assign(kSets, 0);
    }
    const std::size_t set = g % kSets;
    for (std::size_t way = 0; way < kWays; ++way)
        if (slotGroup_[set * kWays + way] == g) return slots_.data() + (set * kWays + way) * kLengthGroup;
    const std::size_t slot = set * kWays + nextWay_[set];
    nextWay_[set] = static_cast<std::uint8_t>((nextWay_[set] + 1) % kWays);
    std::uint32_t* out = slots_.data() + slot * kLengthGroup;
    slotGroup_[slot] = ~std::uint64_t{0};  // not valid until read and verified
    readGroup(g, out, std::min(kLengthGroup, numDocs_ - g * kLengthGroup));
    slotGroup_[slot] = g;
    return out;
}

std::uint64_t DocLengths::length(std::uint64_t doc) {
    if (doc >= numDocs_)
        throw std::out_of_range(fmt::format("document {} of {} (it lists {})", doc, path_.string(), numDocs_));
    return group(doc / kLengthGroup)[doc % kLengthGroup];
}

}  // namespace kiln::data
