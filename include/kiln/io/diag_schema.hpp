// What diag.h5 holds: the record types of its tables, and the meaning of every
// table, column and event kind. The reference page docs/reference/diag.md is
// printed from here (kiln reference diag); the meanings are checked against the
// record types, so a column added without a meaning fails the unit tests.
#pragma once

#include "kiln/io/hdf5_record.hpp"

#include <string>
#include <vector>

namespace kiln::io {

struct StepRecord;
struct TemplateStageRecord;
struct FailureRecord;
struct InstantiationRecord;
struct EvalRecord;
struct EventRecord;

// The record tables' rows (diag_file.hpp's records), each described once: its HDF5 type and column names.
const h5::Record<StepRecord>& stepRecord();
const h5::Record<TemplateStageRecord>& templateRecord();
const h5::Record<FailureRecord>& failureRecord();
const h5::Record<InstantiationRecord>& instantiationRecord();
const h5::Record<EvalRecord>& evalRecord();
const h5::Record<EventRecord>& eventRecord();

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
