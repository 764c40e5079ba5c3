// Input documents for kiln prep: which files, split into work units, and a
// streaming reader that yields one document at a time with where it came from.
#pragma once

#include "kiln/data/byte_stream.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kiln::data {

enum class InputFormat {
    FilePerDocument,  // each file is one document
    Blocks,           // documents separated by one or more blank lines
    JsonLines,        // one JSON object per line; the text is in a named field
    Tokens,           // ids tokenized elsewhere (data/token_inputs.hpp)
    Parquet,          // a column of text or of token ids (data/arrow_inputs.hpp)
    Arrow,            // the same in Arrow IPC files or streams
};

InputFormat parseInputFormat(const std::string& name);  // "file", "blocks", "jsonl", "tokens", "parquet", "arrow"

// A byte range of one input file. Records that start in [begin, end) belong to
// it. A compressed file is one unit, or (zstd) a run of whole frames: then
// records that start in its frames' decompressed bytes belong to it, except
// a line that starts in the frame before it, and the line that starts right
// at its end.
struct WorkUnit {
    std::string path;
    std::uint64_t begin = 0;
    std::uint64_t end = 0;
    Compression compression = Compression::None;
    std::uint64_t idBytes = 0;  // a Megatron dataset's unit (begin, end: documents): the bytes of its ids
    std::uint64_t bytes() const { return idBytes > 0 ? idBytes : end - begin; }
};

// Expands directories (recursively, sorted) and checks every input exists;
// JSON Lines files larger than `splitBytes` are cut into several units so that
// ranks share one big file: plain ones at any byte, zstd ones between frames;
// a gzip file is one unit (its members cannot be found without inflating it).
// The same inputs give the same units on every rank.
// `rawTokenType`: with InputFormat::Tokens, the id type of headerless files.
std::vector<WorkUnit> planWorkUnits(const std::vector<std::string>& inputs, InputFormat format, std::uint64_t splitBytes,
                                    const std::string& rawTokenType = {});

struct Record {
    std::string text;
    std::uint64_t offset = 0;  // byte offset of the record in its file (decompressed: from the unit's start)
    std::uint64_t line = 0;    // 1-based line, or 0 when the unit starts mid-file
    std::string problem;       // empty, or why this record has no usable text
    std::string where;         // where it is, when not "file:line" (a damaged stream: the file and byte)
};

class DocumentReader {
public:
    DocumentReader(const WorkUnit& unit, InputFormat format, std::string jsonField);
    // The next record, or false at the end of the unit.
    bool next(Record& record);
    // "file:line" of a record (or "file" for whole-file documents). For a unit
    // that starts mid-file the line is counted from the file's start: costly,
    // so only for records that are reported.
    std::string location(const Record& record) const;
    // Bytes of the unit's file consumed so far (compressed bytes for a compressed file).
    std::uint64_t consumed() const;

private:
    bool nextLine(std::string& line);
    // Whether a line starting at `position_` is past the unit.
    bool pastEnd() const;
    // At least one more byte in the buffer; false at the stream's end.
    bool fill();
    // At the end of the unit: a record of the stream's damage, once, if it has one.
    bool reportDamage(Record& record);

    WorkUnit unit_;
    InputFormat format_;
    std::string jsonField_;
    std::unique_ptr<ByteStream> stream_;
    std::string buffer_;
    std::size_t taken_ = 0;     // of buffer_
    std::uint64_t position_ = 0;  // of the next byte: file offset (plain), else decompressed from the unit's start
    std::uint64_t lineNo_ = 0;  // line number within the file when known, else 0
    bool done_ = false, damageReported_ = false;
};

}  // namespace kiln::data
