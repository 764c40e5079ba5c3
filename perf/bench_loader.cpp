// Loader benchmarks (issue 4). Modes, each printing JSON lines:
//
//   bench_loader throughput SRC1 SRC2 [--steps N]     (under mpirun -n 1|2)
//     tokens/s delivered per rank, two sources mixed 0.7/0.3, shuffle and
//     packing on, seq_len 2048, global batch 64, each rank its slice; against
//     reading the same number of tokens straight from the sources
//     (SourceReader, documents in file order) in the same run.
//   bench_loader startup SRC [--baseline]
//     wall time from nothing to the first batch and peak resident memory,
//     from a cursor in the middle of the epoch (a restore). --baseline does
//     what Megatron-style loaders do first instead: read every document
//     length, shuffle the documents, build and shuffle the sample index.
//   bench_loader cursor-save [--repeat N]             (under mpirun -n k)
//     seconds per collective cursor save.
//   bench_loader shards SRC [--steps N] [--open-shards K] [--alone] [--hdf5-only] [--no-lengths] [--slice N]   (under mpirun -n k)
//     one source as the job opens it (ranks share the manifest and divide
//     the shard checks): seconds to open, then tokens/s of N steps (seq_len
//     2048, global batch 64, each rank its slice), shard openings per rank
//     (read_by_pread of them without HDF5) and a checksum of every delivered
//     token (equal for the same corpus in any number of shards).
//     --hdf5-only: the baseline, every shard and block read through HDF5.
//     --slice N: N samples a rank, as one rank of globalBatch / N data ranks
//     (0: a pipeline's middle stage, which plans every batch and reads no
//     token); steps/s and the blocks whose tokens were read.
//     KILN_BLOCK_TOKENS_ON_DEMAND=off: every block read whole (the baseline).
//   bench_loader manifest SHARDS DIR
//     a synthetic source of SHARDS shards (no shard files): seconds and peak
//     memory to write and read its manifest as JSON (version 1, every shard
//     listed) and as manifest.json + index.h5, and the bytes a rank broadcasts
//     (the four shard columns).
#include "kiln/base/resident_memory.hpp"
#include "kiln/data/cursor_io.hpp"
#include "kiln/data/loader.hpp"
#include "kiln/data/source_manifest.hpp"

#include <fmt/format.h>
#include <mpi.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <random>

using namespace kiln::data;
using Clock = std::chrono::steady_clock;

namespace {

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Files this process has open now.
std::size_t openFiles() {
    std::size_t n = 0;
    for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
    return n;
}

// CPU seconds of every thread of this process so far (user and system): on a
// shared machine, what the loader costs, without the time others took the cores.
double cpuSeconds() {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    const auto s = [](const timeval& t) { return double(t.tv_sec) + 1e-6 * double(t.tv_usec); };
    return s(usage.ru_utime) + s(usage.ru_stime);
}

double peakRssMb() {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    return usage.ru_maxrss / 1024.0;
}

std::string option(int argc, char** argv, const char* name, const std::string& fallback) {
    for (int i = 1; i + 1 < argc; ++i)
        if (!std::strcmp(argv[i], name)) return argv[i + 1];
    return fallback;
}

bool flag(int argc, char** argv, const char* name) {
    for (int i = 1; i < argc; ++i)
        if (!std::strcmp(argv[i], name)) return true;
    return false;
}

LoaderSpec specFor(const std::vector<std::pair<std::string, double>>& sources, std::uint64_t seqLen, std::uint64_t batch) {
    LoaderSpec s;
    for (const auto& [dir, weight] : sources) s.sources.push_back({std::filesystem::path(dir).filename().string(), dir, weight});
    s.seqLen = seqLen;
    s.globalBatch = batch;
    s.prefetchSteps = 2;
    return s;
}

int throughput(int argc, char** argv) {
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const int steps = std::stoi(option(argc, argv, "--steps", "60"));
    const auto spec = specFor({{argv[2], 0.7}, {argv[3], 0.3}}, 2048, 64);
    const auto corpus = std::make_shared<Corpus>(spec);
    DataLoader loader(spec, corpus, BatchPlanner(spec, *corpus).initial());
    const std::uint64_t first = spec.globalBatch * rank / size, last = spec.globalBatch * (rank + 1) / size;
    loader.setSlice(first, last - first);
    loader.current();  // start-up is measured elsewhere
    loader.commit();
    MPI_Barrier(MPI_COMM_WORLD);  // ranks measure the same interval: they share the cores
    // Training consumes a batch, then asks for the next; here nothing else runs,
    // so the loop measures the loader's own delivery rate with read-ahead on.
    std::uint64_t tokens = 0, checksum = 0;
    const auto t0 = Clock::now();
    for (int s = 0; s < steps; ++s) {
        const Batch& b = loader.current();
        tokens += b.tokens.size();
        checksum += b.tokens[b.tokens.size() / 2];
        loader.commit();
    }
    const double seconds = since(t0);
    MPI_Barrier(MPI_COMM_WORLD);

    // Baseline: the same number of tokens straight from the first source.
    SourceReader reader(argv[2]);
    std::vector<std::uint32_t> buffer;
    std::uint64_t raw = 0;
    const auto t1 = Clock::now();
    for (std::uint64_t d = 0; raw < tokens; d = (d + 1) % reader.numDocuments()) {
        buffer.resize(reader.documentLength(d));
        reader.readTokens(d, 0, buffer.size(), buffer.data());
        raw += buffer.size();
    }
    const double rawSeconds = since(t1);
    fmt::print("{{\"bench\":\"loader-throughput\",\"ranks\":{},\"rank\":{},\"steps\":{},\"tokens\":{},"
               "\"tokens_per_s\":{:.0f},\"raw_read_tokens_per_s\":{:.0f},\"loader_over_raw\":{:.3f},\"wait_s\":{:.4f},"
               "\"checksum\":{}}}\n",
               size, rank, steps, tokens, tokens / seconds, raw / rawSeconds, (tokens / seconds) / (raw / rawSeconds),
               loader.waitSeconds(), checksum % 1000);
    return 0;
}

// Megatron-style: every document length, a shuffled document order, the
// sample index of the whole epoch (document and offset of each sample's
// start), shuffled. Memory and time grow with the corpus.
std::uint64_t buildFullIndex(SourceReader& reader, std::uint64_t seqLen) {
    const std::uint64_t docs = reader.numDocuments();
    std::vector<std::uint64_t> lengths(docs);
    for (std::uint64_t d = 0; d < docs; ++d) lengths[d] = reader.documentLength(d) + 1;
    std::vector<std::uint64_t> order(docs);
    std::iota(order.begin(), order.end(), 0);
    std::mt19937_64 rng(1);
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<std::pair<std::uint64_t, std::uint64_t>> samples;
    std::uint64_t offset = 0;
    for (std::uint64_t i = 0; i < docs; ++i) {
        while (offset < lengths[order[i]]) {
            samples.emplace_back(i, offset);
            offset += seqLen;
        }
        offset -= lengths[order[i]];
    }
    std::shuffle(samples.begin(), samples.end(), rng);
    return samples.size();
}

int startup(int argc, char** argv) {
    const bool baseline = flag(argc, argv, "--baseline");
    const auto t0 = Clock::now();
    const auto spec = specFor({{argv[2], 1.0}}, 2048, 8);
    std::uint64_t tokens = 0, indexSamples = 0;
    if (baseline) {
        SourceReader reader(argv[2]);
        tokens = reader.numTokens();
        indexSamples = buildFullIndex(reader, spec.seqLen);
    } else {
        const auto corpus = std::make_shared<Corpus>(spec);
        tokens = corpus->reader(0).numTokens();
        BatchPlanner planner(spec, *corpus);
        Cursor cursor = planner.initial();
        cursor.sources[0].docPos = corpus->reader(0).numDocuments() / 2;  // restore into the middle of the epoch
        DataLoader loader(spec, corpus, cursor);
        loader.current();
    }
    const double seconds = since(t0);
    fmt::print("{{\"bench\":\"loader-startup\",\"impl\":\"{}\",\"corpus_tokens\":{},\"seconds_to_first_batch\":{:.4f},"
               "\"peak_rss_mb\":{:.1f},\"index_samples\":{}}}\n",
               baseline ? "full-shuffle-index" : "kiln", tokens, seconds, peakRssMb(), indexSamples);
    return 0;
}

int shards(int argc, char** argv) {
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const int steps = std::stoi(option(argc, argv, "--steps", "40"));
    auto spec = specFor({{argv[2], 1.0}}, 2048, 64);
    spec.openShards = std::stoul(option(argc, argv, "--open-shards", std::to_string(spec.openShards)));
    // --alone: every rank reads the manifest and checks every shard itself (kiln before issue 23).
    const bool alone = flag(argc, argv, "--alone");
    // --hdf5-only: every shard and block opened and read through HDF5 (kiln before the preads).
    spec.readWithPreads = !flag(argc, argv, "--hdf5-only");
    // --no-lengths: planned from the shards' offsets even where the source has doc_lengths.h5.
    spec.useLengthIndex = !flag(argc, argv, "--no-lengths");
    MPI_Barrier(MPI_COMM_WORLD);
    const double rssBefore = kiln::base::residentBytes() / 1e6;
    const std::size_t filesBefore = openFiles();
    const auto t0 = Clock::now();
    const auto corpus = std::make_shared<Corpus>(spec, CorpusSharing{alone ? MPI_COMM_NULL : MPI_COMM_WORLD});
    const double openSeconds = since(t0);
    const double rssOpen = kiln::base::residentBytes() / 1e6;
    const std::uint64_t openedAtStart = corpus->reader(0).shardOpenings();
    DataLoader loader(spec, corpus, BatchPlanner(spec, *corpus).initial());
    std::uint64_t first = spec.globalBatch * rank / size, last = spec.globalBatch * (rank + 1) / size;
    // --slice N: N samples a rank, as one rank of a job of globalBatch / N data ranks (0: a middle stage).
    if (const auto slice = option(argc, argv, "--slice", ""); !slice.empty()) last = first + std::stoul(slice);
    loader.setSlice(first, last - first);
    MPI_Barrier(MPI_COMM_WORLD);
    std::uint64_t tokens = 0, checksum = 0;
    const auto t1 = Clock::now();
    const double cpu1 = cpuSeconds();
    for (int step = 0; step < steps; ++step) {
        const Batch& b = loader.current();
        tokens += b.tokens.size();
        for (std::size_t i = 0; i < b.tokens.size(); ++i) checksum += b.tokens[i] * (b.first * b.sampleLength + i + 1);
        loader.commit();
    }
    const double seconds = since(t1);
    const double cpu = cpuSeconds() - cpu1;
    const std::size_t filesAfter = openFiles();
    std::uint64_t all = 0;
    MPI_Reduce(&checksum, &all, 1, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
    const auto& reader = corpus->reader(0);
    fmt::print("{{\"bench\":\"loader-shards\",\"reads\":\"{}\",\"open\":\"{}\",\"source\":\"{}\",\"shards\":{},\"ranks\":{},\"rank\":{},"
               "\"open_s\":{:.4f},\"checked_here\":{},\"steps\":{},\"tokens\":{},\"tokens_per_s\":{:.0f},\"tokens_per_cpu_s\":{:.0f},"
               "\"slice\":{},\"steps_per_s\":{:.1f},\"blocks_whose_tokens_were_read\":{},"
               "\"openings_while_streaming\":{},\"read_by_pread\":{},\"open_shards_limit\":{},\"rss_before_mb\":{:.1f},\"rss_after_open_mb\":{:.1f},"
               "\"rss_end_mb\":{:.1f},\"peak_rss_mb\":{:.1f},\"open_files_added\":{},\"length_index\":{},\"length_group_reads\":{},"
               "\"checksum\":{}}}\n",
               spec.readWithPreads ? "preads" : "hdf5", alone ? "alone" : "together", argv[2], reader.manifest().shards.size(), size, rank, openSeconds,
               corpus->shardsChecked(), steps, tokens, steps > 0 ? tokens / seconds : 0.0, cpu > 0.0 ? tokens / cpu : 0.0,
               last - first, steps / seconds, reader.blockTokenReads(),
               reader.shardOpenings() - openedAtStart, reader.directReads(), spec.openShards, rssBefore, rssOpen,
               kiln::base::residentBytes() / 1e6, peakRssMb(), static_cast<long>(filesAfter) - static_cast<long>(filesBefore),
               reader.plansFromLengthIndex(), reader.lengthGroupReads(), rank == 0 ? all : 0);
    return 0;
}

int manifest(int argc, char** argv) {
    const std::size_t n = std::stoul(argv[2]);
    const std::filesystem::path dir = argv[3];
    std::mt19937_64 rng(1);
    SourceManifest m{"synthetic", {"bytes-v1", 257, 256, ""}, 16, {}};
    for (std::size_t i = 0; i < n; ++i)
        m.shards.push_back({shardFileName(i), 20000 + rng() % 2000, (1u << 26) + rng() % 100000,
                            static_cast<std::uint32_t>(rng()), static_cast<std::uint32_t>(rng())});
    for (const bool json : {false, true}) {  // the index first: peak memory only grows
        const auto where = dir / (json ? "json" : "index");
        std::filesystem::remove_all(where);
        std::filesystem::create_directories(where);
        SourceManifest written = m;
        if (json) {  // version 1: the names stored, so the shards go into the JSON
            written.shards = ShardTable();
            for (std::size_t i = 0; i < n; ++i) {
                ShardSummary s = m.shards[i];
                s.file = "s" + s.file;
                written.shards.push_back(s);
            }
        }
        const auto t0 = Clock::now();
        writeManifest(where, written);
        const double writeSeconds = since(t0);
        const auto t1 = Clock::now();
        const SourceManifest back = readManifest(where);
        const double readSeconds = since(t1);
        std::uint64_t bytes = 0;
        for (const auto& f : std::filesystem::directory_iterator(where)) bytes += std::filesystem::file_size(f);
        fmt::print("{{\"bench\":\"manifest\",\"form\":\"{}\",\"shards\":{},\"write_s\":{:.3f},\"read_s\":{:.3f},"
                   "\"bytes_on_disk\":{},\"broadcast_bytes\":{},\"peak_rss_mb\":{:.1f},\"docs\":{}}}\n",
                   json ? "json-v1" : "json+index.h5", n, writeSeconds, readSeconds, bytes, 24 * back.shards.size(),
                   peakRssMb(), back.numDocs());
    }
    return 0;
}

int cursorSave(int argc, char** argv) {
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const int repeat = std::stoi(option(argc, argv, "--repeat", "20"));
    Cursor cursor;
    for (int s = 0; s < 4; ++s) cursor.sources.push_back({"source" + std::to_string(s), 3, 12345, 17, 999, 0, 42, 7});
    const CursorContext context{2048, 1, 64, 64, "bytes-v1"};
    int pid = getpid();
    MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD);
    const std::string path = (std::filesystem::temp_directory_path() / fmt::format("kiln-bench-cursor-{}.h5", pid)).string();
    saveCursorFile(MPI_COMM_WORLD, path, cursor, context);  // warm-up
    MPI_Barrier(MPI_COMM_WORLD);
    const auto t0 = Clock::now();
    for (int i = 0; i < repeat; ++i) saveCursorFile(MPI_COMM_WORLD, path, cursor, context);
    const double seconds = since(t0) / repeat;
    const Cursor back = loadCursorFile(MPI_COMM_WORLD, path, context);
    if (rank == 0) {
        fmt::print("{{\"bench\":\"cursor-save\",\"ranks\":{},\"seconds_per_save\":{:.5f},\"restored_equal\":{}}}\n", size,
                   seconds, back == cursor);
        std::filesystem::remove(path);
    }
    return back == cursor ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    const std::string mode = argc > 1 ? argv[1] : "";
    int status = 2;
    if (mode == "throughput" && argc > 3) status = throughput(argc, argv);
    else if (mode == "startup" && argc > 2) status = startup(argc, argv);
    else if (mode == "cursor-save") status = cursorSave(argc, argv);
    else if (mode == "shards" && argc > 2) status = shards(argc, argv);
    else if (mode == "manifest" && argc > 3) status = manifest(argc, argv);
    else std::fprintf(stderr, "usage: bench_loader throughput SRC1 SRC2 | startup SRC [--baseline] | cursor-save | shards SRC | manifest N DIR\n");
    MPI_Finalize();
    return status;
}
