// What diag.h5 holds: the record types of its tables, and the meaning of every
// table, column and event kind. The reference page docs/reference/diag.md is
// printed from here (kiln reference diag); the meanings are checked against the
// record types, so a column added without a meaning fails the unit tests.
#pragma once

#include "kiln/io/hdf5.hpp"

#include <string>
#include <vector>

namespace kiln::io {

// The HDF5 compound types of the record tables (diag_file.hpp's records).
h5::Handle stepRecordType();
h5::Handle templateRecordType();
h5::Handle failureRecordType();
h5::Handle instantiationRecordType();
h5::Handle evalRecordType();
h5::Handle eventRecordType();

struct DiagColumn {
    std::string name, meaning;
};

struct DiagTable {
    std::string name, meaning;
    std::vector<DiagColumn> columns;  // empty: not a table of records
};

// Every dataset of diag.h5, the record tables' columns in file order. Throws
// std::logic_error when a column has no meaning or a meaning no column.
std::vector<DiagTable> diagTables();

struct DiagEventKind {
    std::string name, meaning;
};

// Every kind an /events record can have.
const std::vector<DiagEventKind>& diagEventKinds();
bool isDiagEventKind(const std::string& kind);

}  // namespace kiln::io
