#include "kiln/data/cursor_io.hpp"

#include "kiln/base/error.hpp"
#include "kiln/comm/mpi_check.hpp"
#include "kiln/io/hdf5.hpp"
#include "kiln/io/hdf5_array.hpp"
#include "kiln/io/parallel_file.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <sstream>

namespace kiln::data {

namespace h5 = io::h5;

namespace {

std::string joinNames(const Cursor& c) {
    std::string names;
    for (const auto& s : c.sources) names += (names.empty() ? "" : "\n") + s.name;
    return names;
}

std::vector<std::string> splitNames(const std::string& text) {
    std::vector<std::string> names;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) names.push_back(line);
    return names;
}

template <typename T>
void expectSame(const std::string& where, const char* key, const T& saved, const T& now) {
    if (saved == now) return;
    throw InputError(fmt::format("{}: the loader cursor was saved with {} = {}, but this run has {} = {}; a cursor only "
                                 "continues a run with the same {} (start a new run, or restore the old value)",
                                 where, key, saved, key, now, key));
}

}  // namespace

CursorContext cursorContext(const LoaderSpec& spec, const std::string& tokenizerId, const std::string& legacyId) {
    return {spec.seqLen, spec.seed, spec.blockDocs, spec.windowBlocks, tokenizerId, legacyId};
}

namespace {

// The group and its attributes (collective metadata when the file is parallel).
h5::Handle createCursorGroup(hid_t file, const std::string& groupName, const Cursor& cursor, const CursorContext& ctx) {
    h5::Handle group = h5::createGroup(file, groupName, groupName);
    h5::writeAttribute(group, "format", std::string("kiln-loader-cursor"));
    h5::writeAttribute(group, "format_version", std::int64_t{1});
    h5::writeAttribute(group, "sources", joinNames(cursor));
    h5::writeAttribute(group, "seq_len", ctx.seqLen);
    h5::writeAttribute(group, "seed", ctx.seed);
    h5::writeAttribute(group, "shuffle_block", ctx.blockDocs);
    h5::writeAttribute(group, "shuffle_window", ctx.windowBlocks);
    h5::writeAttribute(group, "tokenizer_id", ctx.tokenizerId);
    return group;
}

}  // namespace

void writeCursorRows(hid_t file, const std::string& groupName, const std::vector<std::vector<std::uint64_t>>& rows,
                     const Cursor& cursor, const CursorContext& ctx) {
    h5::LibraryLock lock(h5::libraryMutex());
    h5::Handle group = createCursorGroup(file, groupName, cursor, ctx);
    const std::size_t width = rows.empty() ? 0 : rows.front().size();
    std::vector<std::uint64_t> flat;
    for (const auto& row : rows) {
        if (row.size() != width)
            throw Error(fmt::format("{}: loader cursor rows of different lengths ({} and {})", groupName, width, row.size()),
                        ErrorScope::AllRanks);
        flat.insert(flat.end(), row.begin(), row.end());
    }
    h5::writeArray<std::uint64_t>(group, "rows", {rows.size(), width}, flat, groupName);
}

void writeCursor(hid_t file, const std::string& groupName, MPI_Comm comm, const Cursor& cursor, const CursorContext& ctx) {
    h5::LibraryLock lock(h5::libraryMutex());
    int rank = 0, size = 1;
    KILN_MPI(MPI_Comm_rank(comm, &rank));
    KILN_MPI(MPI_Comm_size(comm, &size));
    const std::vector<std::uint64_t> row = cursorToRow(cursor);
    // Attributes and dataset creation are collective metadata: every rank, same values.
    h5::Handle group = createCursorGroup(file, groupName, cursor, ctx);
    const auto ranks = static_cast<std::uint64_t>(size), me = static_cast<std::uint64_t>(rank);
    h5::Handle rows = h5::createArray<std::uint64_t>(group, "rows", {ranks, row.size()}, groupName);
    h5::writeBlock(rows, {me, 0}, {1, row.size()}, row.data(), groupName, h5::Transfer::Collective);
}

Cursor readCursor(hid_t file, const std::string& groupName, const CursorContext& expected, const std::string& where) {
    h5::LibraryLock lock(h5::libraryMutex());
    if (!h5::exists(file, groupName)) throw InputError(fmt::format("{}: no loader cursor (group {})", where, groupName));
    h5::Handle group = h5::openGroup(file, groupName, where);
    CursorContext saved;
    saved.seqLen = h5::readUintAttribute(group, "seq_len", where);
    saved.seed = h5::readUintAttribute(group, "seed", where);
    saved.blockDocs = h5::readUintAttribute(group, "shuffle_block", where);
    saved.windowBlocks = h5::readUintAttribute(group, "shuffle_window", where);
    saved.tokenizerId = h5::readStringAttribute(group, "tokenizer_id", where);
    expectSame(where, "data.seq_len", saved.seqLen, expected.seqLen);
    // A cursor saved by a kiln that named tokenizers by file is the same tokenizer.
    if (expected.tokenizerLegacyId.empty() || saved.tokenizerId != expected.tokenizerLegacyId)
        expectSame(where, "the tokenizer", saved.tokenizerId, expected.tokenizerId);
    expectSame(where, "run.seed", saved.seed, expected.seed);
    expectSame(where, "data.shuffle_block", saved.blockDocs, expected.blockDocs);
    expectSame(where, "data.shuffle_window", saved.windowBlocks, expected.windowBlocks);
    const auto names = splitNames(h5::readStringAttribute(group, "sources", where));

    h5::Handle rows = h5::openDataset(group, "rows", where);
    const auto dims = h5::extent(rows, where);
    if (dims.size() != 2) throw InputError(fmt::format("{}: cursor rows are not 2-D", where));
    const std::vector<std::uint64_t> all = h5::readArray<std::uint64_t>(rows, where);
    for (std::uint64_t r = 1; r < dims[0]; ++r)
        if (!std::equal(all.begin(), all.begin() + dims[1], all.begin() + r * dims[1]))
            throw InputError(fmt::format("{}: the loader cursor rows of rank 0 and rank {} disagree; the ranks that wrote "
                                         "it were not in step, so this cursor cannot be trusted",
                                         where, r));
    try {
        return cursorFromRow(std::vector<std::uint64_t>(all.begin(), all.begin() + dims[1]), names);
    } catch (const std::invalid_argument& e) {
        throw InputError(fmt::format("{}: malformed loader cursor: {}", where, e.what()));
    }
}

void saveCursorFile(MPI_Comm comm, const std::string& path, const Cursor& cursor, const CursorContext& context) {
    io::ParallelFileWriter writer(comm, path);
    writeCursor(writer.file(), "loader", comm, cursor, context);
    writer.commit();
}

Cursor loadCursorFile(MPI_Comm comm, const std::string& path, const CursorContext& expected) {
    (void)comm;  // every rank reads all rows itself
    h5::Handle file = io::openForReading(path, "loader cursor file");
    return readCursor(file, "loader", expected, path);
}

}  // namespace kiln::data
