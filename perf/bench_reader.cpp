// Reader throughput: kiln's HDF5 shards against the same tokens in a flat
// binary file (tokens + offsets, read with pread), sequential and random
// document reads, page cache warm. Metric: tokens delivered per second
// (tokens read / wall seconds). Validates that both paths return the same
// tokens (a checksum over everything read) and exits non-zero if they differ
// or if HDF5 falls below `--min-ratio` of the flat file's speed.
//
//   bench_reader SOURCE_DIR [--random N] [--min-ratio R]
// Output: one JSON object per line.
#include "kiln/data/source_reader.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <random>
#include <vector>

namespace fs = std::filesystem;
using kiln::data::SourceReader;
using Clock = std::chrono::steady_clock;

namespace {

// The flat baseline: tokens at their stored width in one file, offsets in another.
struct FlatFile {
    int tokens = -1;
    std::vector<std::uint64_t> offsets;  // global, n_docs + 1
    int bytesPerToken = 2;
    std::vector<std::uint16_t> narrow;

    void read(std::uint64_t doc, std::uint32_t* out) {
        const std::uint64_t begin = offsets[doc], n = offsets[doc + 1] - begin;
        if (bytesPerToken == 4) {
            pread(tokens, out, n * 4, static_cast<off_t>(begin * 4));
            return;
        }
        narrow.resize(n);
        pread(tokens, narrow.data(), n * 2, static_cast<off_t>(begin * 2));
        std::copy(narrow.begin(), narrow.end(), out);
    }
};

FlatFile exportFlat(SourceReader& reader, const fs::path& path) {
    FlatFile flat;
    flat.bytesPerToken = reader.manifest().tokenBits / 8;
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    flat.offsets.push_back(0);
    std::vector<std::uint16_t> narrow;
    for (std::uint64_t d = 0; d < reader.numDocuments(); ++d) {
        const auto doc = reader.readDocument(d);
        if (flat.bytesPerToken == 4) {
            ::write(fd, doc.data(), doc.size() * 4);
        } else {
            narrow.assign(doc.begin(), doc.end());
            ::write(fd, narrow.data(), narrow.size() * 2);
        }
        flat.offsets.push_back(flat.offsets.back() + doc.size());
    }
    ::close(fd);
    flat.tokens = ::open(path.c_str(), O_RDONLY);
    return flat;
}

struct Result {
    double seconds = 0;
    std::uint64_t tokens = 0;
    std::uint64_t checksum = 0;
};

template <typename ReadDoc>
Result timeReads(const std::vector<std::uint64_t>& docs, const std::vector<std::uint64_t>& lengths, ReadDoc readDoc) {
    std::vector<std::uint32_t> buffer;
    Result r;
    const auto start = Clock::now();
    for (auto d : docs) {
        buffer.resize(lengths[d]);
        readDoc(d, buffer.data());
        r.tokens += buffer.size();
        for (auto t : buffer) r.checksum = r.checksum * 31 + t;
    }
    r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    return r;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: bench_reader SOURCE_DIR [--random N] [--min-ratio R]\n");
        return 2;
    }
    std::size_t randomReads = 20000;
    double minRatio = 0.2;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!std::strcmp(argv[i], "--random")) randomReads = std::stoul(argv[i + 1]);
        if (!std::strcmp(argv[i], "--min-ratio")) minRatio = std::stod(argv[i + 1]);
    }
    SourceReader reader(argv[1]);
    const fs::path flatPath = fs::temp_directory_path() / fmt::format("kiln-bench-flat-{}.bin", ::getpid());
    FlatFile flat = exportFlat(reader, flatPath);
    std::vector<std::uint64_t> lengths(reader.numDocuments());
    for (std::uint64_t d = 0; d < lengths.size(); ++d) lengths[d] = flat.offsets[d + 1] - flat.offsets[d];

    std::vector<std::uint64_t> sequential(reader.numDocuments());
    std::iota(sequential.begin(), sequential.end(), 0);
    std::vector<std::uint64_t> random(randomReads);
    std::mt19937_64 rng(1);
    for (auto& d : random) d = rng() % reader.numDocuments();

    int status = 0;
    for (const auto& [mode, docs] : {std::pair{"sequential", &sequential}, std::pair{"random", &random}}) {
        // Warm-up pass: page cache and chunk caches, as in steady-state training.
        timeReads(*docs, lengths, [&](std::uint64_t d, std::uint32_t* out) { reader.readTokens(d, 0, lengths[d], out); });
        const Result h5 =
            timeReads(*docs, lengths, [&](std::uint64_t d, std::uint32_t* out) { reader.readTokens(d, 0, lengths[d], out); });
        const Result bin = timeReads(*docs, lengths, [&](std::uint64_t d, std::uint32_t* out) { flat.read(d, out); });
        const double ratio = (h5.tokens / h5.seconds) / (bin.tokens / bin.seconds);
        const bool same = h5.checksum == bin.checksum && h5.tokens == bin.tokens;
        fmt::print("{{\"bench\":\"reader\",\"mode\":\"{}\",\"docs\":{},\"tokens\":{},\"hdf5_tokens_per_s\":{:.0f},"
                   "\"flat_tokens_per_s\":{:.0f},\"hdf5_over_flat\":{:.3f},\"hdf5_us_per_doc\":{:.2f},"
                   "\"flat_us_per_doc\":{:.2f},\"same_tokens\":{}}}\n",
                   mode, docs->size(), h5.tokens, h5.tokens / h5.seconds, bin.tokens / bin.seconds, ratio,
                   1e6 * h5.seconds / docs->size(), 1e6 * bin.seconds / docs->size(), same);
        if (!same) {
            std::fprintf(stderr, "bench_reader: %s: HDF5 and flat reads differ\n", mode);
            status = 1;
        }
        if (ratio < minRatio) {
            std::fprintf(stderr, "bench_reader: %s: HDF5 at %.3f of the flat file's speed, below --min-ratio %.3f\n", mode,
                         ratio, minRatio);
            status = 1;
        }
    }
    ::close(flat.tokens);
    fs::remove(flatPath);
    return status;
}
