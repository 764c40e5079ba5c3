#include "kiln/data/document_source.hpp"

#include "kiln/base/error.hpp"
#include "kiln/data/arrow_inputs.hpp"
#include "kiln/data/token_inputs.hpp"
#include "kiln/data/tokenizer.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>

namespace fs = std::filesystem;

namespace kiln::data {

InputFormat parseInputFormat(const std::string& name) {
    if (name == "file") return InputFormat::FilePerDocument;
    if (name == "blocks") return InputFormat::Blocks;
    if (name == "jsonl") return InputFormat::JsonLines;
    if (name == "tokens") return InputFormat::Tokens;
    if (name == "parquet") return InputFormat::Parquet;
    if (name == "arrow") return InputFormat::Arrow;
    throw InputError(fmt::format("--format {}: expected file (one document per file), blocks (blank-line separated), "
                                 "jsonl (JSON Lines), tokens (ids tokenized elsewhere: Megatron-LM .idx/.bin, .npy, "
                                 "llm.c .bin), parquet or arrow (a column of text or ids, --field)",
                                 name));
}

std::vector<WorkUnit> planWorkUnits(const std::vector<std::string>& inputs, InputFormat format, std::uint64_t splitBytes,
                                    const std::string& rawTokenType) {
    std::vector<std::string> files;
    for (const auto& input : inputs) {
        std::error_code ec;
        if (fs::is_directory(input, ec)) {
            std::vector<std::string> found;
            for (const auto& entry : fs::recursive_directory_iterator(input))
                if (entry.is_regular_file()) found.push_back(entry.path().string());
            std::sort(found.begin(), found.end());
            if (found.empty()) throw InputError(fmt::format("input directory '{}' holds no files", input));
            files.insert(files.end(), found.begin(), found.end());
        } else if (fs::is_regular_file(input, ec)) {
            files.push_back(input);
        } else {
            throw InputError(fmt::format("input '{}': no such file or directory", input));
        }
    }
    if (files.empty()) throw InputError("no input files given (kiln prep --input FILE|DIR ...)");
    if (format == InputFormat::Tokens) return planTokenUnits(files, splitBytes, rawTokenType);
    if (format == InputFormat::Parquet || format == InputFormat::Arrow) return planArrowUnits(files, format);
    std::vector<WorkUnit> units;
    for (const auto& file : files) {
        const std::uint64_t size = fs::file_size(file);
        const Compression compression = detectCompression(file);
        if (format != InputFormat::JsonLines || (compression == Compression::None && size <= splitBytes) || splitBytes == 0 ||
            compression == Compression::Gzip) {
            units.push_back({file, 0, size, compression});
            continue;
        }
        if (compression == Compression::None) {
            for (std::uint64_t at = 0; at < size; at += splitBytes)
                units.push_back({file, at, std::min(size, at + splitBytes), compression});
            continue;
        }
        // zstd: runs of whole frames of about splitBytes of text (one frame,
        // however large, is one unit), measured by the sizes the frame headers
        // give, else as 4 bytes of text per byte stored (text's usual ratio).
        std::vector<ZstdFrame> frames;
        try {
            frames = zstdFrames(file);
        } catch (const InputError&) {
            // Damaged: one unit, read up to the damage, which its reader reports.
            units.push_back({file, 0, size, compression});
            continue;
        }
        std::uint64_t begin = 0, text = 0;
        for (std::size_t k = 0; k < frames.size(); ++k) {
            if (k > 0 && text >= splitBytes) {
                units.push_back({file, begin, frames[k].offset, compression});
                begin = frames[k].offset;
                text = 0;
            }
            const std::uint64_t stored = (k + 1 < frames.size() ? frames[k + 1].offset : size) - frames[k].offset;
            text += frames[k].contentSize > 0 ? frames[k].contentSize : 4 * stored;
        }
        units.push_back({file, begin, size, compression});
    }
    return units;
}

DocumentReader::DocumentReader(const WorkUnit& unit, InputFormat format, std::string jsonField)
    : unit_(unit), format_(format), jsonField_(std::move(jsonField)) {
    const bool plain = unit.compression == Compression::None;
    // A plain unit that starts mid-file starts at the first record that begins
    // in it: the line after the newline that precedes or sits at `begin - 1`.
    // A zstd unit starts at a frame, whose first bytes may continue the line of
    // the frame before: it starts after its first newline. Line numbers are
    // then unknown without a scan; records name their byte offset instead.
    stream_ = ByteStream::open(unit.path, plain && unit.begin > 0 ? unit.begin - 1 : unit.begin);
    position_ = plain && unit.begin > 0 ? unit.begin - 1 : (plain ? unit.begin : 0);
    if (unit.begin > 0) {
        std::string rest;
        const std::uint64_t saved = lineNo_;
        const bool ended = !nextLine(rest);
        lineNo_ = saved;
        done_ = ended && stream_->problem().empty();
    }
}

std::uint64_t DocumentReader::consumed() const { return stream_->filePosition() - unit_.begin; }

bool DocumentReader::fill() {
    if (taken_ < buffer_.size()) return true;
    buffer_.resize(1 << 16);
    taken_ = 0;
    buffer_.resize(stream_->read(buffer_.data(), buffer_.size()));
    return !buffer_.empty();
}

bool DocumentReader::pastEnd() const {
    if (format_ != InputFormat::JsonLines) return false;
    if (unit_.compression == Compression::None) return position_ >= unit_.end;
    const auto end = stream_->decompressedAt(unit_.end);  // known once the unit's last frame is decoded
    return end && position_ > *end;
}

std::string DocumentReader::location(const Record& record) const {
    if (!record.where.empty()) return record.where;
    if (format_ == InputFormat::FilePerDocument) return unit_.path;
    std::uint64_t line = record.line;
    if (line == 0) {
        // Counted from the file's start; for a compressed unit past its first
        // frame, the record's offset counts from where the frames before end.
        auto stream = ByteStream::open(unit_.path, 0);
        bool known = unit_.compression == Compression::None || unit_.begin == 0;
        std::uint64_t target = known ? record.offset : 0;
        std::vector<char> block(1 << 16);
        line = 1;
        for (std::uint64_t at = 0; !known || at < target;) {
            const std::size_t got = stream->read(block.data(), block.size());
            if (got == 0) break;
            if (!known)
                if (const auto before = stream->decompressedAt(unit_.begin)) {
                    known = true;
                    target = *before + record.offset;
                }
            const std::size_t counted = known ? static_cast<std::size_t>(std::min<std::uint64_t>(got, target - at)) : got;
            line += static_cast<std::uint64_t>(std::count(block.data(), block.data() + counted, '\n'));
            at += got;
        }
    }
    return fmt::format("{}:{}", unit_.path, line);
}

bool DocumentReader::nextLine(std::string& line) {
    if (pastEnd()) return false;
    line.clear();
    bool any = false, complete = false;
    while (!complete && fill()) {
        any = true;
        const auto newline = buffer_.find('\n', taken_);
        const std::size_t stop = newline == std::string::npos ? buffer_.size() : newline;
        line.append(buffer_, taken_, stop - taken_);
        position_ += stop - taken_;
        taken_ = stop;
        if (newline != std::string::npos) {
            ++taken_;
            ++position_;
            complete = true;
        }
    }
    if (!any) return false;
    if (!complete && !stream_->problem().empty()) return false;  // cut off by damage: reported as such instead
    ++lineNo_;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    return true;
}

bool DocumentReader::reportDamage(Record& record) {
    done_ = true;
    if (stream_->problem().empty() || damageReported_) return false;
    damageReported_ = true;
    record = Record{};
    record.offset = position_;
    record.problem = fmt::format("damaged {} stream (the rest of its file is lost)", compressionName(unit_.compression));
    record.where = fmt::format("{}: {}", unit_.path, stream_->problem());
    return true;
}

bool DocumentReader::next(Record& record) {
    if (done_) return false;
    record = Record{};
    const auto mark = [&](std::uint64_t offset) {
        record.offset = offset;
        record.line = unit_.begin == 0 ? lineNo_ : 0;
    };
    switch (format_) {
        case InputFormat::Tokens:
        case InputFormat::Parquet:
        case InputFormat::Arrow: return false;  // read by TokenDocumentReader and ArrowDocumentReader
        case InputFormat::FilePerDocument: {
            while (fill()) {
                record.text.append(buffer_, taken_, std::string::npos);
                taken_ = buffer_.size();
            }
            if (!stream_->problem().empty()) return reportDamage(record);  // an incomplete document
            done_ = true;
            if (record.text.find_first_not_of(" \t\r\n") == std::string::npos) record.problem = "empty document";
            return true;
        }
        case InputFormat::Blocks: {
            const auto blank = [](const std::string& l) { return l.find_first_not_of(" \t") == std::string::npos; };
            std::string line;
            bool found = false;
            std::uint64_t lineStart = position_;
            while (!found) {
                lineStart = position_;
                if (!nextLine(line)) break;
                found = !blank(line);
            }
            if (!found) return reportDamage(record);
            mark(lineStart);
            record.text = line;
            while (nextLine(line) && !blank(line)) record.text += "\n" + line;
            return true;
        }
        case InputFormat::JsonLines: {
            const std::uint64_t lineStart = position_;
            std::string line;
            if (!nextLine(line)) return reportDamage(record);
            mark(lineStart);
            if (line.find_first_not_of(" \t") == std::string::npos) {
                record.problem = "empty line";
                return true;
            }
            if (!isValidUtf8(line)) {
                record.problem = "invalid UTF-8";
                return true;
            }
            const auto json = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
            if (json.is_discarded()) {
                record.problem = "not JSON";
            } else if (!json.is_object() || !json.contains(jsonField_)) {
                record.problem = fmt::format("no field '{}'", jsonField_);
            } else if (!json[jsonField_].is_string()) {
                record.problem = fmt::format("field '{}' is not a string", jsonField_);
            } else {
                record.text = json[jsonField_].get<std::string>();
                if (record.text.find_first_not_of(" \t\r\n") == std::string::npos) record.problem = "empty document";
            }
            return true;
        }
    }
    return false;
}

}  // namespace kiln::data
