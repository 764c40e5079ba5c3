// `<source>/doc_lengths.h5`: every document's length in tokens, in source
// order, so that a rank can plan batches without opening shards.
//
// Why: every rank plans the whole global batch from document lengths but
// reads only its slice. Without this file a rank opens the shard of every
// block the batch touches to read its offsets: at 4 096 ranks with small
// slices that is a quarter of a million file openings a step on a parallel
// file system's metadata servers, almost all of them for documents the rank
// never reads. With it, planning reads one file that stays open (a pread of
// 4 KiB per 1 024 documents) and a rank opens only the shards of its slice.
//
// Layout: `/doc_lengths` (uint32 little-endian, one per document, contiguous
// so that a group's place is an offset) and `/doc_lengths_fletcher32` (the
// Fletcher-32 of each group of kLengthGroup lengths as stored), with
// attributes format, format_version, source, n_docs, n_tokens. Written by
// kiln prep (and `kiln inspect --write-lengths` for older sources); a source
// without it plans from its shards as before.
//
// Trust: a group whose checksum differs is an error naming the file. Lengths
// that are sound but wrong (a file from another preparation of the source)
// are caught where they matter: every rank plans from the same lengths, and
// the rank that reads a document's tokens compares its length with the
// shard's offsets (SourceReader::readTokens), an error before any of them is
// used.
#pragma once

#include "kiln/base/unique_fd.hpp"
#include "kiln/data/source_manifest.hpp"

#include <mpi.h>

#include <cstdint>
#include <filesystem>
#include <vector>

namespace kiln::data {

inline constexpr const char* kDocLengthsName = "doc_lengths.h5";
inline constexpr const char* kDocLengthsFormat = "kiln-doc-lengths";
inline constexpr std::int64_t kDocLengthsVersion = 1;
// Documents per checksummed group: 4 KiB, a page, read at once.
inline constexpr std::uint64_t kLengthGroup = 1024;

// A shard whose documents' lengths a rank writes.
struct LengthsShard {
    std::filesystem::path file;
    std::uint64_t numDocs = 0, numTokens = 0;
};

// What every rank of a write agrees on.
struct LengthsTotals {
    std::string source;
    std::uint64_t numDocs = 0, numTokens = 0;
};

// Writes the length index at `path`, collective over `comm` (MPI_COMM_NULL:
// this process alone): each rank reads the offsets of its `shards`, which
// hold documents [firstDoc, firstDoc + their documents) of the source, a
// piece at a time, and writes their lengths at their place (MPI-IO): no rank
// gathers the source's lengths and memory stays bounded. A group that
// straddles ranks is completed from the next ranks' first lengths (an
// all-gather of 4 KiB a rank). Atomic: the file appears complete or not at
// all. Errors (a shard whose offsets are unsound, named) are every rank's.
void writeDocLengths(MPI_Comm comm, const std::filesystem::path& path, const LengthsTotals& totals,
                     const std::vector<LengthsShard>& shards, std::uint64_t firstDoc);
// `<sourceDir>/doc_lengths.h5` from every shard of `manifest`, by this process alone.
void writeDocLengths(const std::filesystem::path& sourceDir, const SourceManifest& manifest);

class DocLengths {
public:
    // Opens and checks the file against the manifest (source, n_docs,
    // n_tokens); InputError naming the file on any mismatch.
    DocLengths(const std::filesystem::path& path, const SourceManifest& manifest);
    // The length of document `doc` (< n_docs). Not thread-safe: the caller
    // serialises (SourceReader holds HDF5's library lock).
    std::uint64_t length(std::uint64_t doc);
    const std::filesystem::path& path() const { return path_; }
    // Groups read so far (each a pread, or an HDF5 read where the places are unknown).
    std::uint64_t groupReads() const { return groupReads_; }

private:
    const std::uint32_t* group(std::uint64_t g);
    void readGroup(std::uint64_t g, std::uint32_t* out, std::uint64_t count);
    std::uint32_t storedSum(std::uint64_t g);
    void readAt(std::uint64_t at, void* into, std::size_t bytes, std::uint64_t g);

    std::filesystem::path path_;
    std::uint64_t numDocs_ = 0;
    std::uint64_t lengthsAt_ = 0, sumsAt_ = 0;  // file offsets of the two datasets
    UniqueFd fd_;
    // 512 groups (2 MiB), 8-way set-associative by group number, the oldest
    // of a set replaced first: a window interleaves the documents of 64
    // blocks, so a set rarely holds more groups in use than it has ways, and
    // a lookup is eight compares (a hash map cost 5 % of the loader; mapped
    // directly, two groups in use that shared a slot were read again at
    // every turn, 4x the reads).
    static constexpr std::size_t kWays = 8, kSets = 64;
    std::vector<std::uint64_t> slotGroup_;
    std::vector<std::uint32_t> slots_;
    std::vector<std::uint8_t> nextWay_;  // per set: the way replaced next
    // The checksums by pages of kLengthGroup (each covering a million
    // documents): one pread a group read, not two, for sources of up to 16 M documents.
    static constexpr std::size_t kCachedSumPages = 16;
    std::vector<std::uint64_t> sumPageOf_;
    std::vector<std::uint32_t> sumPages_;
    std::uint64_t groupReads_ = 0;
};

}  // namespace kiln::data
