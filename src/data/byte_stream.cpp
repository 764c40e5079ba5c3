#include "kiln/data/byte_stream.hpp"

#include "input_file.hpp"
#include "kiln/base/error.hpp"

#include <fmt/format.h>
#include <zlib.h>
#include <zstd.h>

#include <cstdio>
#include <cstring>

namespace kiln::data {
namespace {

constexpr std::size_t kInputBlock = 1 << 17;

using detail::InputFile;
using detail::littleEndian;

class PlainStream final : public ByteStream {
public:
    PlainStream(const std::string& path, std::uint64_t begin) : file_(path, begin), position_(begin) {}
    std::size_t read(char* out, std::size_t n) override {
        const std::size_t got = file_.read(out, n);
        position_ += got;
        return got;
    }
    std::uint64_t filePosition() const override { return position_; }
    std::optional<std::uint64_t> decompressedAt(std::uint64_t) const override { return std::nullopt; }
    Compression compression() const override { return Compression::None; }

private:
    InputFile file_;
    std::uint64_t position_;
};

// Compressed input read in blocks; `consumed` of the current block tells the file position.
class CompressedInput {
public:
    CompressedInput(const std::string& path, std::uint64_t begin) : file_(path, begin), start_(begin), buffer_(kInputBlock) {}
    // Refills when all was consumed; false at the end of the file.
    bool available() {
        if (offset_ < size_) return true;
        start_ += size_;
        size_ = file_.read(buffer_.data(), buffer_.size());
        offset_ = 0;
        return size_ > 0;
    }
    const unsigned char* data() const { return buffer_.data() + offset_; }
    std::size_t size() const { return size_ - offset_; }
    void consume(std::size_t n) { offset_ += n; }
    std::uint64_t position() const { return start_ + offset_; }

private:
    InputFile file_;
    std::uint64_t start_;
    std::vector<unsigned char> buffer_;
    std::size_t size_ = 0, offset_ = 0;
};

class GzipStream final : public ByteStream {
public:
    GzipStream(const std::string& path, std::uint64_t begin) : path_(path), input_(path, begin) {
        if (inflateInit2(&z_, 15 + 16) != Z_OK) throw Error("zlib: cannot initialise inflate", ErrorScope::ThisRank);
    }
    ~GzipStream() override { inflateEnd(&z_); }
    std::size_t read(char* out, std::size_t n) override {
        if (done_) return 0;
        z_.next_out = reinterpret_cast<Bytef*>(out);
        z_.avail_out = static_cast<uInt>(n);
        while (z_.avail_out == n) {
            if (!input_.available()) {
                // The end of the file: fine between members, not inside one.
                if (inMember_)
                    problem_ = fmt::format("truncated gzip stream: the file ends at byte {} inside a member that began "
                                           "at byte {}",
                                           input_.position(), memberStart_);
                done_ = true;
                break;
            }
            if (!inMember_) {
                inMember_ = true;
                memberStart_ = input_.position();
            }
            z_.next_in = const_cast<Bytef*>(input_.data());
            z_.avail_in = static_cast<uInt>(input_.size());
            const auto before = z_.avail_in;
            const int rc = inflate(&z_, Z_NO_FLUSH);
            input_.consume(before - z_.avail_in);
            if (rc == Z_STREAM_END) {  // a member ends; concatenated members (pigz, bgzip) follow
                inMember_ = false;
                inflateReset(&z_);
            } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
                problem_ = fmt::format("corrupt gzip stream at byte {} of the file (zlib: {})", input_.position(),
                                       z_.msg ? z_.msg : zError(rc));
                done_ = true;
                break;
            }
        }
        return n - z_.avail_out;
    }
    std::uint64_t filePosition() const override { return input_.position(); }
    std::optional<std::uint64_t> decompressedAt(std::uint64_t) const override { return std::nullopt; }
    Compression compression() const override { return Compression::Gzip; }

private:
    std::string path_;
    CompressedInput input_;
    z_stream z_{};
    bool inMember_ = false, done_ = false;
    std::uint64_t memberStart_ = 0;
};

class ZstdStream final : public ByteStream {
public:
    ZstdStream(const std::string& path, std::uint64_t begin) : input_(path, begin), context_(ZSTD_createDCtx()) {
        if (!context_) throw Error("zstd: cannot create a decompression context", ErrorScope::ThisRank);
    }
    ~ZstdStream() override { ZSTD_freeDCtx(context_); }
    std::size_t read(char* out, std::size_t n) override {
        if (done_) return 0;
        ZSTD_outBuffer output{out, n, 0};
        while (output.pos == 0) {
            if (!input_.available()) {
                if (inFrame_)
                    problem_ = fmt::format("truncated zstd stream: the file ends at byte {} inside a frame that began at "
                                           "byte {}",
                                           input_.position(), frameStart_);
                done_ = true;
                break;
            }
            if (!inFrame_) {
                inFrame_ = true;
                frameStart_ = input_.position();
            }
            ZSTD_inBuffer in{input_.data(), input_.size(), 0};
            const std::size_t rc = ZSTD_decompressStream(context_, &output, &in);
            input_.consume(in.pos);
            if (ZSTD_isError(rc)) {
                problem_ = fmt::format("corrupt zstd stream at byte {} of the file (a frame that began at byte {}; zstd: {})",
                                       input_.position(), frameStart_, ZSTD_getErrorName(rc));
                done_ = true;
                break;
            }
            if (rc == 0) {  // a frame decoded and flushed: the input stops at its end
                inFrame_ = false;
                frameEnds_.push_back({input_.position(), produced_ + output.pos});
                if (output.pos == output.size) break;
            }
        }
        produced_ += output.pos;
        return output.pos;
    }
    std::uint64_t filePosition() const override { return input_.position(); }
    std::optional<std::uint64_t> decompressedAt(std::uint64_t boundary) const override {
        for (const auto& [file, decompressed] : frameEnds_)
            if (file == boundary) return decompressed;
        return std::nullopt;
    }
    Compression compression() const override { return Compression::Zstd; }

private:
    CompressedInput input_;
    ZSTD_DCtx* context_;
    bool inFrame_ = false, done_ = false;
    std::uint64_t frameStart_ = 0, produced_ = 0;
    std::vector<std::pair<std::uint64_t, std::uint64_t>> frameEnds_;  // file offset, decompressed offset
};

}  // namespace

Compression detectCompression(const std::string& path) {
    const InputFile file(path);
    unsigned char magic[4] = {0, 0, 0, 0};
    const std::size_t got = file.read(magic, 4);
    if (got >= 2 && magic[0] == 0x1f && magic[1] == 0x8b) return Compression::Gzip;
    if (got == 4 && littleEndian(magic, 4) == 0xFD2FB528u) return Compression::Zstd;
    return Compression::None;
}

const char* compressionName(Compression compression) {
    switch (compression) {
        case Compression::Gzip: return "gzip";
        case Compression::Zstd: return "zstd";
        case Compression::None: break;
    }
    return "plain";
}

std::vector<ZstdFrame> zstdFrames(const std::string& path) {
    const InputFile file(path);
    std::vector<ZstdFrame> starts;
    const auto at = [&](std::uint64_t offset, unsigned char* out, std::size_t n) { return file.readAt(offset, out, n) == n; };
    const auto damaged = [&](std::uint64_t offset, const char* what) {
        return InputError(fmt::format("input '{}': damaged zstd stream at byte {} ({})", path, offset, what),
                          ErrorScope::ThisRank);
    };
    const auto size = file.size();
    unsigned char b[18];
    for (std::uint64_t pos = 0; pos < size;) {
        if (!at(pos, b, 4)) throw damaged(pos, "a frame's magic number is cut off");
        const std::uint32_t magic = littleEndian(b, 4);
        if ((magic & 0xFFFFFFF0u) == 0x184D2A50u) {  // skippable frame: its size follows
            if (!at(pos + 4, b, 4)) throw damaged(pos, "a skippable frame's size is cut off");
            pos += 8 + littleEndian(b, 4);
            continue;
        }
        if (magic != 0xFD2FB528u) throw damaged(pos, "no frame starts there");
        if (!at(pos + 4, b, 1)) throw damaged(pos, "the frame header is cut off");
        const unsigned descriptor = b[0];
        const unsigned fcsFlag = descriptor >> 6, singleSegment = (descriptor >> 5) & 1, checksum = (descriptor >> 2) & 1;
        static const unsigned dictionaryBytes[4] = {0, 1, 2, 4}, sizeBytes[4] = {0, 2, 4, 8};
        const unsigned sizeField = fcsFlag == 0 ? singleSegment : sizeBytes[fcsFlag];
        const std::uint64_t sizeAt = pos + 4 + 1 + (singleSegment ? 0 : 1) + dictionaryBytes[descriptor & 3];
        ZstdFrame frame{pos, 0};
        if (sizeField > 0) {
            if (!at(sizeAt, b, sizeField)) throw damaged(pos, "the frame header is cut off");
            for (unsigned k = sizeField; k-- > 0;) frame.contentSize = (frame.contentSize << 8) | b[k];
            if (sizeField == 2) frame.contentSize += 256;  // the 2-byte field counts from 256
        }
        starts.push_back(frame);
        pos = sizeAt + sizeField;
        for (bool last = false; !last;) {
            if (!at(pos, b, 3)) throw damaged(pos, "a block header is cut off");
            const std::uint32_t header = littleEndian(b, 3);
            last = header & 1;
            const unsigned type = (header >> 1) & 3;
            if (type == 3) throw damaged(pos, "a block of the reserved type");
            pos += 3 + (type == 1 ? 1 : header >> 3);  // an RLE block stores one byte
        }
        pos += checksum ? 4 : 0;
        if (pos > size) throw damaged(starts.back().offset, "the last frame is cut off");
    }
    return starts;
}

std::unique_ptr<ByteStream> ByteStream::open(const std::string& path, std::uint64_t begin) {
    switch (detectCompression(path)) {
        case Compression::Gzip: return std::make_unique<GzipStream>(path, begin);
        case Compression::Zstd: return std::make_unique<ZstdStream>(path, begin);
        case Compression::None: break;
    }
    return std::make_unique<PlainStream>(path, begin);
}

}  // namespace kiln::data
