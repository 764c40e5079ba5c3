// What reading one piece of a shuffle block costs the kernel at least, here:
// the floor under issue 23's item 3 for shards smaller than a block, which
// the stream opens, reads twice (offsets, tokens) and closes for every piece.
// Opens random shards of a prepared source (warm in the page cache) and
// prints one JSON object: microseconds per openat + 2 preads + close (the
// bytes a piece of this source reads), per openat + close, per 1-byte pread
// on a file held open, and per getppid (a bare system call, the baseline).
//
//   bench_piece_floor SOURCE_DIR [--calls N (100000)] [--bytes B (34000)]
#include <fmt/format.h>

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double microsecondsEach(Clock::time_point from, long calls) {
    return std::chrono::duration<double, std::micro>(Clock::now() - from).count() / static_cast<double>(calls);
}

std::string option(int argc, char** argv, const char* name, const char* otherwise) {
    for (int i = 2; i + 1 < argc; ++i)
        if (std::strcmp(argv[i], name) == 0) return argv[i + 1];
    return otherwise;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: bench_piece_floor SOURCE_DIR [--calls N] [--bytes B]\n");
        return 2;
    }
    const long calls = std::stol(option(argc, argv, "--calls", "100000"));
    const std::size_t bytes = std::stoul(option(argc, argv, "--bytes", "34000"));
    std::vector<std::string> shards;
    for (const auto& entry : std::filesystem::directory_iterator(argv[1]))
        if (entry.path().filename().string().rfind("shard-", 0) == 0) shards.push_back(entry.path().filename().string());
    if (shards.empty()) {
        std::fprintf(stderr, "%s: no shard-*.h5 files\n", argv[1]);
        return 1;
    }
    const int dir = ::open(argv[1], O_PATH | O_DIRECTORY | O_CLOEXEC);
    std::vector<char> buffer(bytes + 4096);
    std::mt19937_64 rng(23);
    const auto pick = [&] { return shards[rng() % shards.size()].c_str(); };
    long failures = 0;

    auto t = Clock::now();
    for (long i = 0; i < calls; ++i) {  // a piece: offsets (a small read), tokens, as the stream does
        const int fd = ::openat(dir, pick(), O_RDONLY | O_CLOEXEC);
        failures += ::pread(fd, buffer.data(), 256, 2048) < 0;
        failures += ::pread(fd, buffer.data(), bytes, 4096) < 0;
        ::close(fd);
    }
    const double piece = microsecondsEach(t, calls);
    t = Clock::now();
    for (long i = 0; i < calls; ++i) ::close(::openat(dir, pick(), O_RDONLY | O_CLOEXEC));
    const double openClose = microsecondsEach(t, calls);
    const int held = ::openat(dir, shards[0].c_str(), O_RDONLY | O_CLOEXEC);
    t = Clock::now();
    for (long i = 0; i < calls; ++i) failures += ::pread(held, buffer.data(), 1, 0) < 0;
    const double smallRead = microsecondsEach(t, calls);
    ::close(held);
    t = Clock::now();
    for (long i = 0; i < calls; ++i) ::syscall(SYS_getppid);
    const double bare = microsecondsEach(t, calls);
    ::close(dir);
    fmt::print("{{\"bench\":\"piece-floor\",\"source\":\"{}\",\"shards\":{},\"calls\":{},\"piece_bytes\":{},"
               "\"us_open_2_preads_close\":{:.2f},\"us_open_close\":{:.2f},\"us_pread_1_byte\":{:.2f},\"us_getppid\":{:.2f},"
               "\"failed_reads\":{}}}\n",
               argv[1], shards.size(), calls, bytes, piece, openClose, smallRead, bare, failures);
    return failures == 0 ? 0 : 1;
}
