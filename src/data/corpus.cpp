#include "kiln/data/corpus.hpp"

#include "kiln/base/error.hpp"
#include "kiln/base/log.hpp"
#include "kiln/base/open_files.hpp"
#include "kiln/comm/error_agreement.hpp"
#include "kiln/comm/mpi_check.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>

namespace kiln::data {
namespace {

// The manifest of `source`, read by rank 0 of `comm` and sent to the others.
SourceManifest sharedManifest(const SourceSpec& source, MPI_Comm comm) {
    int rank = 0;
    if (comm != MPI_COMM_NULL) KILN_MPI(MPI_Comm_rank(comm, &rank));
    SourceManifest manifest;
    std::string problem;
    if (rank == 0) {
        problem = comm::problemOf([&] {
            if (!std::filesystem::is_directory(source.dir))
                throw InputError(fmt::format("data.mix names source '{}', but {} does not exist; prepare it with kiln prep "
                                             "--source {} --out {}",
                                             source.name, source.dir.string(), source.name,
                                             source.dir.parent_path().string()));
            manifest = readManifest(source.dir);
        });
    }
    comm::throwFirstError(comm, problem);
    if (comm != MPI_COMM_NULL) broadcastManifest(comm, 0, manifest);
    return manifest;
}

// Combines the chunk places the ranks found in their shares of `reader`'s
// shards (each shard's entry is non-zero on the one rank that checked it), so
// that every rank streams their blocks with preads. Nothing is sent for a
// source without such shards (shards written in pieces: their chunks are
// listed at their second block instead).
void shareShardChunks(MPI_Comm comm, SourceReader& reader) {
    if (comm == MPI_COMM_NULL) return;
    int known = reader.shardChunks().empty() ? 0 : 1;
    KILN_MPI(MPI_Allreduce(MPI_IN_PLACE, &known, 1, MPI_INT, MPI_MAX, comm));
    if (!known) return;
    std::vector<ShardChunks> places = reader.shardChunks();
    places.resize(reader.manifest().shards.size());
    auto* words = reinterpret_cast<std::uint64_t*>(places.data());
    const std::uint64_t count = places.size() * (sizeof(ShardChunks) / sizeof(std::uint64_t));
    for (std::uint64_t at = 0; at < count; at += 1u << 30)  // MPI counts are ints
        KILN_MPI(MPI_Allreduce(MPI_IN_PLACE, words + at, static_cast<int>(std::min<std::uint64_t>(1u << 30, count - at)),
                               MPI_UINT64_T, MPI_BOR, comm));
    reader.setShardChunks(std::move(places));
}

}  // namespace

std::uint64_t windowMemoryBytes(const ShardTable& shards, std::uint64_t blockDocs, std::uint64_t windowBlocks) {
    constexpr std::uint64_t kAtLeast = 8ull << 20, kAtMost = 256ull << 20;
    if (shards.empty() || shards.totalDocs() == 0) return kAtLeast;
    const double meanDocBytes = double(shards.totalTokens()) / double(shards.totalDocs()) * sizeof(std::uint32_t) +
                                sizeof(std::uint64_t);
    const double bytes = 1.25 * double(windowBlocks) * double(blockDocs) * meanDocBytes;
    return std::clamp(static_cast<std::uint64_t>(bytes), kAtLeast, kAtMost);
}

std::uint64_t Corpus::memoryBudget() const {
    std::uint64_t bytes = 0;
    for (const auto& reader : readers_) bytes += reader->memoryBudget();
    return bytes;
}

Corpus::Corpus(const LoaderSpec& spec, const CorpusSharing& sharing) {
    int rank = 0, ranks = 1;
    if (sharing.comm != MPI_COMM_NULL) {
        KILN_MPI(MPI_Comm_rank(sharing.comm, &rank));
        KILN_MPI(MPI_Comm_size(sharing.comm, &ranks));
    }
    // Open shard files per source, MPI's and HDF5's own, the logs: room for all.
    // Agreed, so that a rank with a lower limit stops every rank, not only itself.
    const std::size_t files = spec.sources.size() * spec.openShards + 256;
    std::string tooFew;
    if (const std::size_t limit = base::ensureOpenFiles(files); limit < files)
        tooFew = fmt::format("data.open_shards = {} for {} source{} needs about {} open files, but this process may "
                             "open only {} (ulimit -n; the hard limit is the most it can raise itself to): lower "
                             "data.open_shards or raise the limit",
                             spec.openShards, spec.sources.size(), spec.sources.size() == 1 ? "" : "s", files, limit);
    comm::throwFirstError(sharing.comm, tooFew);
    ReaderOptions options;
    options.maxOpenShards = spec.openShards;
    options.wholeShardDocs = 2 * spec.blockDocs;
    options.blockDocs = spec.blockDocs;
    options.checkShardsAtOpen = false;  // below, divided among the ranks
    options.readWithPreads = spec.readWithPreads;
    options.useLengthIndex = spec.useLengthIndex;
    for (const auto& source : spec.sources) {
        SourceManifest manifest = sharedManifest(source, sharing.comm);
        options.shardMemoryBytes = spec.shardMemoryBytes > 0
                                       ? spec.shardMemoryBytes
                                       : windowMemoryBytes(manifest.shards, spec.blockDocs, spec.windowBlocks);
        readers_.push_back(std::make_unique<SourceReader>(source.dir, std::move(manifest), options));
    }
    if (readers_.empty()) throw InputError("data.mix names no source");

    // The shards of all sources as one list, cut into `ranks` contiguous shares.
    for (const auto& reader : readers_) total_ += reader->manifest().shards.size();
    std::string problem = comm::problemOf([&] {
        if (!sharing.checkShards) return;
        const std::uint64_t begin = total_ * rank / ranks, end = total_ * (rank + 1) / ranks;
        std::uint64_t first = 0;
        for (const auto& reader : readers_) {
            const std::uint64_t n = reader->manifest().shards.size();
            if (begin < first + n && end > first)
                reader->checkShards(std::max(begin, first) - first, std::min(end, first + n) - first);
            first += n;
        }
        checked_ = end - begin;
    });
    comm::throwFirstError(sharing.comm, problem);
    for (auto& reader : readers_) {
        if (sharing.checkShards) shareShardChunks(sharing.comm, *reader);
        reader->markAllChecked();
        reader->dropShardChecksums();  // 8 bytes a shard: 12 MB at 1.5 M shards
    }
    // Which sources have shards of format 1: known to the ranks that opened them.
    std::vector<int> checksummed;
    for (const auto& reader : readers_) checksummed.push_back(reader->checksummed() ? 1 : 0);
    if (sharing.comm != MPI_COMM_NULL)
        KILN_MPI(MPI_Allreduce(MPI_IN_PLACE, checksummed.data(), static_cast<int>(checksummed.size()), MPI_INT, MPI_MIN,
                               sharing.comm));

    for (std::size_t i = 0; i < readers_.size(); ++i) {
        auto& reader = *readers_[i];
        static std::set<std::string> noted;  // once per source and process
        if (!checksummed[i] && noted.insert(reader.directory().string()).second)
            log::info("  note: source {} has shards of format version 1, without per-chunk checksums: its reads are not "
                      "verified (token ids still are). Prepare it again with this kiln to have them verified.",
                      reader.directory().string());
        if (spec.useLengthIndex && !reader.plansFromLengthIndex() && noted.insert(reader.directory().string() + "#lengths").second)
            log::info("  note: source {} has no length index ({}): every rank opens the shard of every block it plans, "
                      "not only those its slice reads. Write it with kiln inspect {} --write-lengths.",
                      reader.directory().string(), kDocLengthsName, reader.directory().string());
        if (reader.numTokens() + reader.numDocuments() < spec.seqLen + 1)
            throw InputError(fmt::format("source {} holds {} tokens (with EOS), fewer than one sample of data.seq_len + 1 = {}",
                                         reader.directory().string(), reader.numTokens() + reader.numDocuments(),
                                         spec.seqLen + 1));
    }
    if (!spec.tokenizer.empty()) {
        tokenizer_ = openTokenizer(spec.tokenizer)->info();
    } else {
        tokenizer_ = readers_.front()->manifest().tokenizer;
    }
    for (const auto& reader : readers_) reader->requireTokenizer(tokenizer_);
}

}  // namespace kiln::data
