// Parquet files and Arrow IPC files and streams for kiln prep (--format
// parquet | arrow), read with Apache Arrow's own C++ library (the pyarrow
// wheel's, which bootstrap.sh installs). One named column holds each row's
// document: text (string), or token ids tokenized elsewhere (a list of
// integers: IBM's fms-fsdp loader's layout, one document a row).
#pragma once

#include "kiln/data/document_source.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kiln::data {

// Whether this kiln was built with Arrow.
bool haveArrow();

// A unit per Parquet row group or Arrow IPC file record batch (an IPC
// stream is one unit): WorkUnit::begin/end index them, idBytes their size.
std::vector<WorkUnit> planArrowUnits(const std::vector<std::string>& files, InputFormat format);

class ArrowDocumentReader {
public:
    // Throws InputError naming the file and the columns it has when `column` is not one of them.
    ArrowDocumentReader(const WorkUnit& unit, InputFormat format, const std::string& column);
    ~ArrowDocumentReader();
    // Whether the column holds token ids (a list of integers) rather than text.
    bool holdsIds() const;
    // The next row's text (text columns; a null or empty row is a record with a problem), or false at the end.
    bool next(Record& record);
    // The next row's ids (id columns), each checked below `vocabSize`; false at the end.
    bool next(std::vector<std::uint32_t>& ids, std::uint32_t vocabSize);
    // "file: row N" of the last row.
    std::string location() const;
    std::uint64_t consumed() const;

private:
    struct Batches;
    std::unique_ptr<Batches> batches_;
};

}  // namespace kiln::data
