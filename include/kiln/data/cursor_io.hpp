// Saving and restoring the loader cursor with parallel HDF5. Every rank
// writes its own row in one collective write; restoring reads all rows on any
// number of ranks and checks that they agree, so a rank that drifted is caught
// instead of silently feeding other data.
//
//   GROUP (e.g. /loader of a checkpoint, / of a cursor file)
//     attributes  format "kiln-loader-cursor", format_version (1), sources (names, one per line),
//                 seq_len, seed, shuffle_block, shuffle_window, tokenizer_id
//     rows        uint64 (ranks of the writing job, row length): row r is rank r's cursor as
//                 cursorToRow (data/cursor.hpp) writes it
#pragma once

#include "kiln/data/cursor.hpp"
#include "kiln/data/loader_spec.hpp"

#include <hdf5.h>
#include <mpi.h>

#include <string>
#include <vector>

namespace kiln::data {

// What a cursor means: a cursor only continues a run with the same values.
struct CursorContext {
    std::uint64_t seqLen = 0;
    std::uint64_t seed = 0;
    std::uint64_t blockDocs = 0;
    std::uint64_t windowBlocks = 0;
    std::string tokenizerId;
    std::string tokenizerLegacyId{};  // also accepted on restore (TokenizerInfo::legacyId); never written
};

CursorContext cursorContext(const LoaderSpec& spec, const std::string& tokenizerId, const std::string& legacyId = "");

// Collective over the communicator `file` was opened with (MPI-IO driver):
// writes group `group` holding the rows and the context.
void writeCursor(hid_t file, const std::string& group, MPI_Comm comm, const Cursor& cursor, const CursorContext& context);
// The same group written by one process (serial HDF5): `rows` are every
// rank's cursorToRow, gathered by the caller. What checkpoints use, so that no
// MPI-IO runs while ranks may fail.
void writeCursorRows(hid_t file, const std::string& group, const std::vector<std::vector<std::uint64_t>>& rows,
                     const Cursor& cursor, const CursorContext& context);

// Reads it back (any rank count); errors name `where` and what differs.
Cursor readCursor(hid_t file, const std::string& group, const CursorContext& expected, const std::string& where);

// Whole-file convenience: a cursor file written atomically (temporary + rename).
void saveCursorFile(MPI_Comm comm, const std::string& path, const Cursor& cursor, const CursorContext& context);
Cursor loadCursorFile(MPI_Comm comm, const std::string& path, const CursorContext& expected);

}  // namespace kiln::data
