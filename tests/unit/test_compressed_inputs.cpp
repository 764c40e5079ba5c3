// Compressed inputs of kiln prep (issue 39, item 1): gzip (one or several
// members) and zstd (one or several frames) give the records the plain file
// gives; a zstd file split between frames gives every record exactly once,
// whether a frame ends inside a line or right after one; line numbers are
// those of the decompressed file; a truncated or corrupt stream keeps the
// records before the damage and reports it once, naming the file and byte.
#include "kiln/data/byte_stream.hpp"
#include "kiln/data/document_source.hpp"

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

using namespace kiln::data;
namespace fs = std::filesystem;

namespace {

class CompressedInputs : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = fs::temp_directory_path() / ("kiln-compressed-" + std::to_string(::getpid()));
        fs::remove_all(dir_);
        fs::create_directories(dir_);
        // 400 JSON lines of different lengths, non-ASCII text and a bad line among them.
        for (int i = 0; i < 400; ++i) {
            if (i == 123) {
                text_ += "not json\n";
                continue;
            }
            text_ += "{\"text\": \"document " + std::to_string(i) + " " + std::string(static_cast<std::size_t>(i % 37), 'x') +
                     " caf\u00e9 \u65e5\u672c\"}\n";
        }
    }
    void TearDown() override { fs::remove_all(dir_); }

    std::string write(const std::string& name, const std::string& bytes) const {
        const auto path = (dir_ / name).string();
        std::ofstream(path, std::ios::binary) << bytes;
        return path;
    }
    static std::string gzip(const std::string& text) {
        std::vector<unsigned char> out(compressBound(static_cast<uLong>(text.size())) + 64);
        z_stream z{};
        deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
        z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
        z.avail_in = static_cast<uInt>(text.size());
        z.next_out = out.data();
        z.avail_out = static_cast<uInt>(out.size());
        EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
        deflateEnd(&z);
        return std::string(reinterpret_cast<char*>(out.data()), z.total_out);
    }
    // One zstd frame per piece of `text` cut at `cuts` (byte offsets).
    static std::string zstd(const std::string& text, const std::vector<std::size_t>& cuts = {}) {
        std::string out;
        std::size_t from = 0;
        auto ends = cuts;
        ends.push_back(text.size());
        ZSTD_CCtx* context = ZSTD_createCCtx();
        ZSTD_CCtx_setParameter(context, ZSTD_c_checksumFlag, 1);  // as the zstd tool writes them
        for (const auto to : ends) {
            std::string frame(ZSTD_compressBound(to - from), '\0');
            frame.resize(ZSTD_compress2(context, frame.data(), frame.size(), text.data() + from, to - from));
            out += frame;
            from = to;
        }
        ZSTD_freeCCtx(context);
        return out;
    }
    static std::vector<std::string> lines(const std::string& text) {
        std::vector<std::string> out;
        std::size_t from = 0;
        for (auto nl = text.find('\n'); nl != std::string::npos; from = nl + 1, nl = text.find('\n', from))
            out.push_back(text.substr(from, nl - from));
        return out;
    }
    // Every record of every unit of `path`, in order, as "text|problem".
    static std::vector<std::string> records(const std::string& path, std::uint64_t splitBytes,
                                            std::size_t* unitCount = nullptr) {
        const auto units = planWorkUnits({path}, InputFormat::JsonLines, splitBytes);
        if (unitCount) *unitCount = units.size();
        std::vector<std::string> out;
        for (const auto& unit : units) {
            DocumentReader reader(unit, InputFormat::JsonLines, "text");
            for (Record r; reader.next(r);) out.push_back(r.text + "|" + r.problem);
        }
        return out;
    }

    fs::path dir_;
    std::string text_;
};

}  // namespace

TEST_F(CompressedInputs, GzipAndZstdGiveThePlainFilesRecords) {
    const auto plain = records(write("plain.jsonl", text_), 0);
    ASSERT_EQ(plain.size(), 400u);
    EXPECT_EQ(plain[123], "|not JSON");
    const std::string half = text_.substr(0, 5000), rest = text_.substr(5000);
    // Detected by content: the names say nothing.
    const auto gz = write("a.data", gzip(text_)), members = write("b.data", gzip(half) + gzip(rest));
    const auto zst = write("c.data", zstd(text_)), frames = write("d.data", zstd(text_, {777, 5000, 5001, 9000}));
    EXPECT_EQ(detectCompression(gz), Compression::Gzip);
    EXPECT_EQ(detectCompression(zst), Compression::Zstd);
    for (const auto& path : {gz, members, zst, frames}) EXPECT_EQ(records(path, 0), plain) << path;
    // File-per-document and blank-line blocks read through the same streams.
    DocumentReader whole({gz, 0, fs::file_size(gz), Compression::Gzip}, InputFormat::FilePerDocument, "");
    Record r;
    ASSERT_TRUE(whole.next(r));
    EXPECT_EQ(r.text, text_);
    EXPECT_FALSE(whole.next(r));
}

TEST_F(CompressedInputs, ZstdFramesAreSharedOutEveryRecordOnce) {
    const auto plain = records(write("plain.jsonl", text_), 0);
    const auto all = lines(text_);
    // Frames cut inside lines, right after a newline, right before one, and one without any newline.
    std::vector<std::size_t> cuts;
    std::size_t lineEnd = text_.find('\n', 3000) + 1;
    for (std::size_t at = 211; at < text_.size(); at += 997) cuts.push_back(at);
    cuts.push_back(lineEnd);
    cuts.push_back(lineEnd + 3);  // a frame of 3 bytes inside one line
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    const auto path = write("frames.jsonl.zst", zstd(text_, cuts));
    const auto frames = zstdFrames(path);
    ASSERT_EQ(frames.size(), cuts.size() + 1);
    EXPECT_EQ(frames[1].contentSize, cuts[1] - cuts[0]) << "the size the frame header gives";
    for (const std::uint64_t split : {1ull, 500ull, 2000ull}) {
        std::size_t units = 0;
        EXPECT_EQ(records(path, split, &units), plain) << "split " << split;
        EXPECT_GT(units, 1u) << split;
    }
    // Line numbers of a unit that starts mid-file count from the file's start.
    const auto units = planWorkUnits({path}, InputFormat::JsonLines, 500);
    ASSERT_GT(units.size(), 3u);
    DocumentReader reader(units[3], InputFormat::JsonLines, "text");
    Record first;
    ASSERT_TRUE(reader.next(first));
    const std::string location = reader.location(first);
    const auto line = std::stoul(location.substr(location.rfind(':') + 1));
    ASSERT_GE(line, 1u);
    ASSERT_LE(line, all.size());
    EXPECT_NE(all[line - 1].find(first.text), std::string::npos) << location << " holds " << first.text;
}

TEST_F(CompressedInputs, DamageKeepsTheRecordsBeforeAndIsReportedOnce) {
    const auto plain = records(write("plain.jsonl", text_), 0);
    for (const bool zst : {false, true}) {
        const std::string packed = zst ? zstd(text_, {4000, 8000}) : gzip(text_.substr(0, 8000)) + gzip(text_.substr(8000));
        const auto truncated = write(zst ? "t.zst" : "t.gz", packed.substr(0, packed.size() * 3 / 4));
        const auto got = records(truncated, 0);
        ASSERT_GE(got.size(), 2u);
        EXPECT_EQ(got.back(), std::string("|damaged ") + (zst ? "zstd" : "gzip") + " stream (the rest of its file is lost)");
        const std::vector<std::string> before(got.begin(), got.end() - 1);
        const auto firstPart = static_cast<std::size_t>(std::count(text_.begin(), text_.begin() + 8000, '\n'));
        EXPECT_GE(before.size(), firstPart) << "at least the records of the undamaged first member or frames";
        EXPECT_EQ(before, std::vector<std::string>(plain.begin(), plain.begin() + static_cast<long>(before.size())));
        DocumentReader reader({truncated, 0, fs::file_size(truncated), zst ? Compression::Zstd : Compression::Gzip},
                              InputFormat::JsonLines, "text");
        Record r, last;
        while (reader.next(r)) last = r;
        const std::string where = reader.location(last);
        EXPECT_NE(where.find(truncated + ": truncated " + (zst ? "zstd" : "gzip") + " stream: the file ends at byte " +
                             std::to_string(fs::file_size(truncated))),
                  std::string::npos)
            << where;
    }
    // A corrupt byte inside a zstd frame: its content checksum or its decoder notices.
    std::string packed = zstd(text_, {4000});
    packed[packed.size() - 200] ^= 0x5a;
    const auto corrupt = write("c.zst", packed);
    const auto got = records(corrupt, 0);
    ASSERT_FALSE(got.empty());
    EXPECT_EQ(got.back(), "|damaged zstd stream (the rest of its file is lost)");
    // A damaged frame header is refused when the file is split, naming the file and byte.
    std::string headless = zstd(text_, {4000});
    headless[zstdFrames(write("ok.zst", headless))[1].offset] = 'x';
    const auto broken = write("broken.zst", headless);
    try {
        zstdFrames(broken);
        FAIL() << "a damaged frame header was accepted";
    } catch (const std::exception& e) {
        EXPECT_NE(std::string(e.what()).find(broken + "': damaged zstd stream at byte"), std::string::npos) << e.what();
    }
}
