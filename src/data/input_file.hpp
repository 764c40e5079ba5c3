// An input file of kiln prep opened for binary reads at offsets, closed by
// its destructor, its errors naming the file (internal to the data module:
// compressed streams, pre-tokenized files, Arrow's file-or-stream check).
#pragma once

#include "kiln/base/error.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <cstdio>
#include <string>

namespace kiln::data::detail {

class InputFile {
public:
    // Opened at byte `begin` (InputError naming the file if it cannot be).
    explicit InputFile(std::string path, std::uint64_t begin = 0) : f_(std::fopen(path.c_str(), "rb")), path_(std::move(path)) {
        if (!f_) throw InputError(fmt::format("input '{}': cannot open for reading", path_), ErrorScope::ThisRank);
        if (begin > 0 && fseeko(f_, static_cast<off_t>(begin), SEEK_SET) != 0)
            throw InputError(fmt::format("input '{}': cannot seek to byte {}", path_, begin), ErrorScope::ThisRank);
    }
    ~InputFile() { std::fclose(f_); }
    InputFile(const InputFile&) = delete;
    InputFile& operator=(const InputFile&) = delete;

    const std::string& path() const { return path_; }
    // Up to `n` bytes from the current position.
    std::size_t read(void* out, std::size_t n) const { return std::fread(out, 1, n, f_); }
    // Up to `n` bytes from byte `offset` (fewer at the end of the file).
    std::size_t readAt(std::uint64_t offset, void* out, std::size_t n) const {
        if (fseeko(f_, static_cast<off_t>(offset), SEEK_SET) != 0) return 0;
        return read(out, n);
    }
    // Exactly `n` bytes from `offset`, or an InputError saying `what` is cut off.
    void mustRead(std::uint64_t offset, void* out, std::size_t n, const char* what) const {
        if (readAt(offset, out, n) != n)
            throw InputError(fmt::format("input '{}': cut off: {} ({} bytes at byte {}) is missing", path_, what, n, offset),
                             ErrorScope::ThisRank);
    }
    std::uint64_t size() const {
        fseeko(f_, 0, SEEK_END);
        return static_cast<std::uint64_t>(ftello(f_));
    }

private:
    std::FILE* f_;
    std::string path_;
};

// The unsigned little-endian integer of `bytes` bytes at `p`.
inline std::uint64_t littleEndian(const unsigned char* p, int bytes) {
    std::uint64_t v = 0;
    for (int k = bytes - 1; k >= 0; --k) v = (v << 8) | p[k];
    return v;
}

}  // namespace kiln::data::detail
