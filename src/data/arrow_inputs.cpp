#include "kiln/data/arrow_inputs.hpp"

#include "input_file.hpp"
#include "kiln/base/error.hpp"

#include <arrow/api.h>
#include <arrow/io/file.h>
#include <arrow/ipc/api.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <parquet/arrow/reader.h>
#include <parquet/file_reader.h>
#include <parquet/metadata.h>

#include <cstring>
#include <filesystem>

namespace kiln::data {
namespace {

// An Arrow result's value, or an InputError naming the file and Arrow's reason.
template <class T>
T valueOr(arrow::Result<T> result, const std::string& path, const char* doing) {
    if (!result.ok())
        throw InputError(fmt::format("input '{}': {}: {}", path, doing, result.status().ToString()), ErrorScope::ThisRank);
    return std::move(result).ValueOrDie();
}

void check(const arrow::Status& status, const std::string& path, const char* doing) {
    if (!status.ok())
        throw InputError(fmt::format("input '{}': {}: {}", path, doing, status.ToString()), ErrorScope::ThisRank);
}

// An IPC file starts (and ends) with "ARROW1"; a stream does not.
bool isIpcFile(const std::string& path) {
    char magic[6] = {};
    return detail::InputFile(path).read(magic, 6) == 6 && std::memcmp(magic, "ARROW1", 6) == 0;
}

std::unique_ptr<parquet::arrow::FileReader> openParquet(const std::string& path) {
    auto input = valueOr(arrow::io::ReadableFile::Open(path), path, "cannot open");
    return valueOr(parquet::arrow::OpenFile(input, arrow::default_memory_pool()), path, "not a readable Parquet file");
}

bool isText(const arrow::DataType& t) {
    return t.id() == arrow::Type::STRING || t.id() == arrow::Type::LARGE_STRING || t.id() == arrow::Type::STRING_VIEW;
}

bool isIds(const arrow::DataType& t) {
    if (t.id() != arrow::Type::LIST && t.id() != arrow::Type::LARGE_LIST) return false;
    const auto& value = *static_cast<const arrow::BaseListType&>(t).value_type();
    return arrow::is_integer(value.id());
}

}  // namespace

bool haveArrow() { return true; }

std::vector<WorkUnit> planArrowUnits(const std::vector<std::string>& files, InputFormat format) try {
    std::vector<WorkUnit> units;
    for (const auto& path : files) {
        if (format == InputFormat::Parquet) {
            const auto reader = openParquet(path);
            const auto metadata = reader->parquet_reader()->metadata();
            for (int g = 0; g < metadata->num_row_groups(); ++g)
                units.push_back({path, std::uint64_t(g), std::uint64_t(g) + 1, Compression::None,
                                 static_cast<std::uint64_t>(std::max<std::int64_t>(1, metadata->RowGroup(g)->total_compressed_size()))});
        } else if (isIpcFile(path)) {
            auto input = valueOr(arrow::io::ReadableFile::Open(path), path, "cannot open");
            const auto reader = valueOr(arrow::ipc::RecordBatchFileReader::Open(input), path, "not a readable Arrow IPC file");
            const auto size = valueOr(input->GetSize(), path, "cannot size");
            const int batches = reader->num_record_batches();
            for (int b = 0; b < batches; ++b)
                units.push_back({path, std::uint64_t(b), std::uint64_t(b) + 1, Compression::None,
                                 static_cast<std::uint64_t>(std::max<std::int64_t>(1, size / std::max(1, batches)))});
        } else {
            units.push_back({path, 0, 1, Compression::None, std::filesystem::file_size(path)});  // a stream: read in order
        }
    }
    return units;
} catch (const InputError& e) {
    throw InputError(e.what());  // every rank plans alike: one of them reports it
}

struct ArrowDocumentReader::Batches {
    WorkUnit unit;
    std::string column;
    int field = -1;
    bool ids = false;
    std::unique_ptr<parquet::arrow::FileReader> parquet;
    std::shared_ptr<arrow::ipc::RecordBatchFileReader> ipcFile;
    std::shared_ptr<arrow::ipc::RecordBatchStreamReader> ipcStream;
    std::shared_ptr<arrow::io::ReadableFile> input;
    std::vector<std::shared_ptr<arrow::Array>> chunks;  // of the unit, not yet read
    std::shared_ptr<arrow::Array> current;
    std::int64_t row = 0;       // within `current`
    std::int64_t rowInUnit = 0;  // rows passed in the unit
    bool loaded = false;
    std::uint64_t consumed = 0;

    // The next row's array and index within it, or false at the unit's end.
    bool advance() {
        while (!current || row >= current->length()) {
            if (current) rowInUnit += current->length();
            current.reset();
            row = 0;
            if (!chunks.empty()) {
                current = chunks.front();
                chunks.erase(chunks.begin());
                continue;
            }
            if (ipcStream) {
                auto batch = valueOr(ipcStream->Next(), unit.path, "cannot read a record batch");
                if (!batch) return false;
                current = batch->column(field);
                continue;
            }
            if (loaded) return false;
            loaded = true;
            if (parquet) {
                std::shared_ptr<arrow::ChunkedArray> column;
                check(parquet->RowGroup(static_cast<int>(unit.begin))->Column(field)->Read(&column), unit.path,
                      "cannot read a row group");
                chunks = column->chunks();
            } else {
                const auto batch = valueOr(ipcFile->ReadRecordBatch(static_cast<int>(unit.begin)), unit.path,
                                           "cannot read a record batch");
                chunks = {batch->column(field)};
            }
            consumed = unit.bytes();
        }
        return true;
    }
    // Where the row at `row` of `current` is: its row in the file (a Parquet
    // row group's first row is in the metadata), or in its record batch.
    std::string where() const {
        if (parquet) return fmt::format("{}: row {} (row group {})", unit.path, firstRow + rowInUnit + row, unit.begin);
        if (ipcFile) return fmt::format("{}: record batch {}, row {}", unit.path, unit.begin, rowInUnit + row);
        return fmt::format("{}: row {}", unit.path, rowInUnit + row);
    }
    std::int64_t firstRow = 0;  // Parquet: of the unit's row group
};

ArrowDocumentReader::ArrowDocumentReader(const WorkUnit& unit, InputFormat format, const std::string& column)
    : batches_(std::make_unique<Batches>()) {
    auto& b = *batches_;
    b.unit = unit;
    b.column = column;
    std::shared_ptr<arrow::Schema> schema;
    if (format == InputFormat::Parquet) {
        b.parquet = openParquet(unit.path);
        check(b.parquet->GetSchema(&schema), unit.path, "no schema");
        const auto metadata = b.parquet->parquet_reader()->metadata();
        for (std::uint64_t g = 0; g < unit.begin; ++g) b.firstRow += metadata->RowGroup(static_cast<int>(g))->num_rows();
    } else {
        b.input = valueOr(arrow::io::ReadableFile::Open(unit.path), unit.path, "cannot open");
        if (isIpcFile(unit.path)) {
            b.ipcFile = valueOr(arrow::ipc::RecordBatchFileReader::Open(b.input), unit.path, "not a readable Arrow IPC file");
            schema = b.ipcFile->schema();
        } else {
            b.ipcStream = valueOr(arrow::ipc::RecordBatchStreamReader::Open(b.input), unit.path,
                                  "not a readable Arrow IPC file or stream");
            schema = b.ipcStream->schema();
        }
    }
    b.field = schema->GetFieldIndex(column);
    if (b.field < 0) {
        std::vector<std::string> names;
        for (const auto& f : schema->fields()) names.push_back(fmt::format("{} ({})", f->name(), f->type()->ToString()));
        throw InputError(fmt::format("input '{}': no column '{}' (--field); its columns are: {}", unit.path, column,
                                     fmt::join(names, ", ")));
    }
    const auto& type = *schema->field(b.field)->type();
    if (!isText(type) && !isIds(type))
        throw InputError(fmt::format("input '{}': column '{}' is {}; kiln reads a string column (text) or a list of "
                                     "integers (token ids)",
                                     unit.path, column, type.ToString()));
    b.ids = isIds(type);
}

ArrowDocumentReader::~ArrowDocumentReader() = default;

bool ArrowDocumentReader::holdsIds() const { return batches_->ids; }
std::string ArrowDocumentReader::location() const { return batches_->where(); }
std::uint64_t ArrowDocumentReader::consumed() const { return batches_->consumed; }

bool ArrowDocumentReader::next(Record& record) {
    auto& b = *batches_;
    if (!b.advance()) return false;
    record = Record{};
    const auto i = b.row;
    record.where = b.where();
    ++b.row;
    if (b.current->IsNull(i)) {
        record.problem = "null value";
        return true;
    }
    switch (b.current->type_id()) {
        case arrow::Type::STRING: record.text = static_cast<const arrow::StringArray&>(*b.current).GetString(i); break;
        case arrow::Type::LARGE_STRING: record.text = static_cast<const arrow::LargeStringArray&>(*b.current).GetString(i); break;
        default: record.text = std::string(static_cast<const arrow::StringViewArray&>(*b.current).GetView(i)); break;
    }
    if (record.text.find_first_not_of(" \t\r\n") == std::string::npos) record.problem = "empty document";
    return true;
}

namespace {

template <class ListArray>
void appendIds(const ListArray& list, std::int64_t i, std::uint32_t vocab, const std::string& where,
               std::vector<std::uint32_t>& out) {
    const auto& values = *list.values();
    const auto from = list.value_offset(i), to = list.value_offset(i + 1);
    for (auto k = from; k < to; ++k) {
        std::int64_t id = 0;
        switch (values.type_id()) {
#define KILN_ID_CASE(TYPE, ARRAY) \
    case arrow::Type::TYPE: id = static_cast<std::int64_t>(static_cast<const arrow::ARRAY&>(values).Value(k)); break;
            KILN_ID_CASE(INT8, Int8Array)
            KILN_ID_CASE(INT16, Int16Array)
            KILN_ID_CASE(INT32, Int32Array)
            KILN_ID_CASE(INT64, Int64Array)
            KILN_ID_CASE(UINT8, UInt8Array)
            KILN_ID_CASE(UINT16, UInt16Array)
            KILN_ID_CASE(UINT32, UInt32Array)
#undef KILN_ID_CASE
            case arrow::Type::UINT64: {
                const auto v = static_cast<const arrow::UInt64Array&>(values).Value(k);
                id = v > std::uint64_t(INT64_MAX) ? -1 : static_cast<std::int64_t>(v);
                break;
            }
            default: id = -1;
        }
        if (id < 0 || id >= static_cast<std::int64_t>(vocab))
            throw InputError(fmt::format("{}, id {}: token id {} is outside the vocabulary of {} ids (0 to {}); nothing "
                                         "was written",
                                         where, k - from, id, vocab, vocab - 1),
                             ErrorScope::ThisRank);
        out.push_back(static_cast<std::uint32_t>(id));
    }
}

}  // namespace

bool ArrowDocumentReader::next(std::vector<std::uint32_t>& ids, std::uint32_t vocabSize) {
    auto& b = *batches_;
    ids.clear();
    if (!b.advance()) return false;
    const auto i = b.row;
    const std::string where = b.where();
    ++b.row;
    if (b.current->IsNull(i)) return true;  // no ids: an empty document
    if (b.current->type_id() == arrow::Type::LIST)
        appendIds(static_cast<const arrow::ListArray&>(*b.current), i, vocabSize, where, ids);
    else
        appendIds(static_cast<const arrow::LargeListArray&>(*b.current), i, vocabSize, where, ids);
    return true;
}

}  // namespace kiln::data
