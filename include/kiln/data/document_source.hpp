// Input documents for kiln prep: which files, split into work units, and a
// streaming reader that yields one document at a time with where it came from.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace kiln::data {

enum class InputFormat {
    FilePerDocument,  // each file is one document
    Blocks,           // documents separated by one or more blank lines
    JsonLines,        // one JSON object per line; the text is in a named field
};

InputFormat parseInputFormat(const std::string& name);  // "file", "blocks", "jsonl"

// A byte range of one input file. Records that start in [begin, end) belong to it.
struct WorkUnit {
    std::string path;
    std::uint64_t begin = 0;
    std::uint64_t end = 0;
    std::uint64_t bytes() const { return end - begin; }
};

// Expands directories (recursively, sorted) and checks every input exists;
// JSON Lines files larger than `splitBytes` are cut into several units so that
// ranks share one big file. The same inputs give the same units on every rank.
std::vector<WorkUnit> planWorkUnits(const std::vector<std::string>& inputs, InputFormat format, std::uint64_t splitBytes);

struct Record {
    std::string text;
    std::uint64_t offset = 0;  // byte offset of the record in its file
    std::uint64_t line = 0;    // 1-based line, or 0 when the unit starts mid-file
    std::string problem;       // empty, or why this record has no usable text
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
    // Bytes of the unit consumed so far.
    std::uint64_t consumed() const { return position_ - unit_.begin; }

private:
    bool nextLine(std::string& line);

    WorkUnit unit_;
    InputFormat format_;
    std::string jsonField_;
    std::ifstream in_;
    std::uint64_t position_ = 0;
    std::uint64_t lineNo_ = 0;  // line number within the file when known, else 0
    bool done_ = false;
};

}  // namespace kiln::data
