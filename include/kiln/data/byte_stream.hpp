// The bytes of one input file for kiln prep, decompressed where the file is
// gzip or zstd (told by its first bytes, not its name). A damaged stream
// ends the bytes where the damage starts and says why and at which byte of
// the file; what came before it is good.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kiln::data {

enum class Compression { None, Gzip, Zstd };

// By the file's magic bytes (1f 8b: gzip; 28 b5 2f fd: zstd).
Compression detectCompression(const std::string& path);
const char* compressionName(Compression compression);

// The zstd frames of `path` (skippable frames skipped), found from the frame
// and block headers without decompressing: where each starts, and its
// decompressed size where its header says (0 where not). Throws InputError
// naming the file and byte where a header is damaged.
struct ZstdFrame {
    std::uint64_t offset = 0, contentSize = 0;
};
std::vector<ZstdFrame> zstdFrames(const std::string& path);

class ByteStream {
public:
    virtual ~ByteStream() = default;
    // Opens `path` at byte `begin` of the file (for a compressed file the
    // start of a gzip member or zstd frame: 0, or an offset of zstdFrames).
    static std::unique_ptr<ByteStream> open(const std::string& path, std::uint64_t begin = 0);

    // Up to `n` bytes of the (decompressed) stream; 0 at its end or at damage (see problem()).
    virtual std::size_t read(char* out, std::size_t n) = 0;
    // Bytes of the file consumed so far (its compressed bytes for a compressed file).
    virtual std::uint64_t filePosition() const = 0;
    // Where a compressed stream's frame that ends at file byte `boundary`
    // ended in the decompressed stream (counted from `begin`), once the
    // stream has passed it; nothing for a plain file or before then.
    virtual std::optional<std::uint64_t> decompressedAt(std::uint64_t boundary) const = 0;
    // Empty, or why the stream ended early: "truncated gzip stream ..." or
    // "corrupt zstd stream at byte N ...".
    const std::string& problem() const { return problem_; }
    virtual Compression compression() const = 0;

protected:
    std::string problem_;
};

}  // namespace kiln::data
