#include "kiln/io/diag_file.hpp"

#include "kiln/io/diag_schema.hpp"

#include "kiln/base/error.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstring>
#include <algorithm>
#include <filesystem>
#include <sstream>
#include <stdexcept>

namespace kiln::io {
namespace {

// A table that grows by rows: 1-D records (columns == 0) or a 2-D matrix of `columns`.
h5::Handle createTable(hid_t file, const char* name, hid_t type, hsize_t columns, const std::string& context) {
    const int rank = columns > 0 ? 2 : 1;
    hsize_t dims[2] = {0, columns}, maxDims[2] = {H5S_UNLIMITED, columns}, chunk[2] = {256, columns};
    h5::Handle space(KILN_H5(H5Screate_simple(rank, dims, maxDims), context));
    h5::Handle props(KILN_H5(H5Pcreate(H5P_DATASET_CREATE), context));
    KILN_H5(H5Pset_chunk(props, rank, chunk), context);
    return h5::Handle(KILN_H5(H5Dcreate2(file, name, type, space, H5P_DEFAULT, props, H5P_DEFAULT), context));
}


}  // namespace

h5::Handle openDiagForReading(const std::string& path) {
    h5::LibraryLock lock(h5::libraryMutex());
    h5::quietErrors();
    if (!std::filesystem::exists(path)) throw InputError(fmt::format("diagnostics {}: no such file", path));
    // SWMR read: works while the run writes, and after it was killed.
    hid_t id = H5Fopen(path.c_str(), H5F_ACC_RDONLY | H5F_ACC_SWMR_READ, H5P_DEFAULT);
    if (id < 0) id = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    if (id < 0)
        throw InputError(fmt::format("diagnostics {}: cannot be read: truncated or not HDF5 ({} bytes)", path,
                                     std::filesystem::file_size(path)));
    return h5::Handle(id);
}

DiagFile::DiagFile(const std::string& path, const std::string& deckText, const std::vector<std::string>& sources,
                   const std::vector<TemplateStageRecord>& templates, bool continueRun, RouterShape router)
    : path_(path), sources_(sources.size()), router_(router) {
    h5::LibraryLock lock(h5::libraryMutex());
    h5::quietErrors();
    stepType_ = stepRecord().type("diag");
    eventType_ = eventRecord().type("diag");
    instantiationType_ = instantiationRecord().type("diag");
    failureType_ = failureRecord().type("diag");
    evalType_ = evalRecord().type("diag");
    h5::Handle access(KILN_H5(H5Pcreate(H5P_FILE_ACCESS), path));
    KILN_H5(H5Pset_libver_bounds(access, H5F_LIBVER_LATEST, H5F_LIBVER_LATEST), path);  // SWMR needs the latest format
    // A diag.h5 that exists is never overwritten. Appending copies its records
    // into a fresh file (a file whose writer was killed stays marked as open
    // for writing, and HDF5 refuses to reopen it for writing); the old file is
    // removed only once the copy is complete.
    std::vector<StepRecord> oldSteps;
    std::vector<std::vector<std::uint64_t>> oldTokens;
    std::vector<EventRecord> oldEvents;
    std::vector<InstantiationRecord> oldInstantiations;
    std::vector<FailureRecord> oldFailures;
    std::vector<EvalRecord> oldEvals;
    std::vector<RouterRow> oldRouter;
    std::string aside;
    if (std::filesystem::exists(path)) {
        const auto stamp = std::chrono::system_clock::now().time_since_epoch() / std::chrono::milliseconds(1);
        aside = fmt::format("{}.{}", path, stamp);
        if (continueRun) {
            h5::Handle old = openDiagForReading(path);
            std::vector<std::string> oldSources;
            oldSteps = readSteps(old);
            oldTokens = readSourceTokens(old, oldSources);
            oldEvents = readEvents(old);
            oldInstantiations = readInstantiations(old);
            oldFailures = readFailures(old);
            oldEvals = readEvals(old);
            RouterShape oldShape;
            oldRouter = readRouter(old, oldShape);
            // Another model's routers (resumed with other experts is refused before; a dense run has none): dropped.
            if (oldShape.blocks != router.blocks || oldShape.experts != router.experts) oldRouter.clear();
            // Steps recorded without routers (by a kiln before them): zero rows keep the tables aligned with /steps.
            if (oldRouter.size() < oldSteps.size()) oldRouter.insert(oldRouter.begin(), oldSteps.size() - oldRouter.size(), RouterRow{});
            if (oldSources != sources)
                throw InputError(fmt::format("diagnostics {} records the sources [{}], this run has [{}]; a different "
                                             "data.mix source list needs a new diag.h5 (move it aside)",
                                             path, fmt::join(oldSources, " "), fmt::join(sources, " ")),
                                 ErrorScope::ThisRank);
        } else {
            // A run that starts afresh (no checkpoint to resume from) keeps the earlier attempts' failures: the
            // one that ended the last attempt caused this one (issue 65). Its steps are trained again, so the
            // rest stays in the file moved aside, which the new file names.
            try {
                h5::Handle old = openDiagForReading(path);
                oldFailures = readFailures(old);
            } catch (const std::exception&) {
                oldFailures.clear();  // unreadable: it stays aside, named below
            }
        }
        std::filesystem::rename(path, aside);
    }
    {
        std::filesystem::create_directories(std::filesystem::path(path).parent_path());
        file_ = h5::Handle(KILN_H5(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, access), path));
        h5::writeAttribute(file_, "format", std::string("kiln-diagnostics"));
        h5::writeAttribute(file_, "format_version", std::int64_t{1});
        const auto text = h5::fixedString(deckText.size(), path);
        h5::Handle scalar(KILN_H5(H5Screate(H5S_SCALAR), path));
        h5::Handle config(KILN_H5(H5Dcreate2(file_, "config", text, scalar, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), path));
        KILN_H5(H5Dwrite(config, text, H5S_ALL, H5S_ALL, H5P_DEFAULT, deckText.c_str()), path);
        steps_ = createTable(file_, "steps", stepType_, 0, path);
        sourceTokens_ = createTable(file_, "source_tokens", H5T_STD_U64LE, std::max<std::size_t>(sources_, 1), path);
        std::string names;
        for (const auto& s : sources) names += (names.empty() ? "" : "\n") + s;
        h5::writeAttribute(sourceTokens_, "sources", names);
        events_ = createTable(file_, "events", eventType_, 0, path);
        instantiations_ = createTable(file_, "instantiations", instantiationType_, 0, path);
        failures_ = createTable(file_, "failures", failureType_, 0, path);
        evals_ = createTable(file_, "eval", evalType_, 0, path);
        h5::writeRecords(file_, "templates", templateRecord(), templates, path);
        if (router.experts > 0) {
            routerBalance_ = createTable(file_, "router_balance", H5T_IEEE_F64LE, router.blocks, path);
            routerZ_ = createTable(file_, "router_z", H5T_IEEE_F64LE, router.blocks, path);
            expertLoad_ = createTable(file_, "expert_load", H5T_IEEE_F64LE, hsize_t{router.blocks} * router.experts, path);
            h5::writeAttribute(expertLoad_, "blocks", std::uint64_t{router.blocks});
            h5::writeAttribute(expertLoad_, "experts", std::uint64_t{router.experts});
        }
    }
    for (const auto& row : oldRouter) appendRouter(row);
    std::vector<std::uint64_t> flatTokens;
    for (const auto& row : oldTokens) flatTokens.insert(flatTokens.end(), row.begin(), row.end());
    append(steps_, stepType_, oldSteps.data(), 0, oldSteps.size());
    if (!oldSteps.empty()) lastStep_ = oldSteps.back().step;
    append(sourceTokens_, H5T_NATIVE_UINT64, flatTokens.data(), std::max<std::size_t>(sources_, 1), oldTokens.size());
    append(events_, eventType_, oldEvents.data(), 0, oldEvents.size());
    append(instantiations_, instantiationType_, oldInstantiations.data(), 0, oldInstantiations.size());
    append(failures_, failureType_, oldFailures.data(), 0, oldFailures.size());
    append(evals_, evalType_, oldEvals.data(), 0, oldEvals.size());
    if (!continueRun && !aside.empty()) {
        EventRecord e;
        e.time = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
        fitText(e.kind, "earlier_attempt");
        fitText(e.detail, fmt::format("this run started afresh (no checkpoint to resume from); the earlier attempt's "
                                      "diag.h5 is {}, its {} failure row{} copied into /failures",
                                      aside, oldFailures.size(), oldFailures.size() == 1 ? "" : "s"));
        append(events_, eventType_, &e, 0, 1);
    }
    KILN_H5(H5Fflush(file_, H5F_SCOPE_GLOBAL), path);
    if (continueRun && !aside.empty()) std::filesystem::remove(aside);  // everything is in the new file
    KILN_H5(H5Fstart_swmr_write(file_), path);
}

DiagFile::~DiagFile() {
    h5::LibraryLock lock(h5::libraryMutex());
    steps_.reset();
    sourceTokens_.reset();
    routerBalance_.reset();
    routerZ_.reset();
    expertLoad_.reset();
    events_.reset();
    instantiations_.reset();
    failures_.reset();
    evals_.reset();
    file_.reset();
}

void DiagFile::append(hid_t dataset, hid_t memType, const void* record, std::uint64_t columns, std::uint64_t rows) {
    if (rows == 0) return;
    const int rank = columns > 0 ? 2 : 1;
    hsize_t dims[2] = {0, 0};
    {
        h5::Handle space(KILN_H5(H5Dget_space(dataset), path_));
        KILN_H5(H5Sget_simple_extent_dims(space, dims, nullptr), "diag");
    }
    hsize_t newDims[2] = {dims[0] + rows, columns}, start[2] = {dims[0], 0}, count[2] = {rows, columns};
    KILN_H5(H5Dset_extent(dataset, newDims), path_);
    h5::Handle space(KILN_H5(H5Dget_space(dataset), path_));
    KILN_H5(H5Sselect_hyperslab(space, H5S_SELECT_SET, start, nullptr, count, nullptr), path_);
    h5::Handle memSpace(KILN_H5(H5Screate_simple(rank, count, nullptr), path_));
    KILN_H5(H5Dwrite(dataset, memType, memSpace, space, H5P_DEFAULT, record), path_);
    KILN_H5(H5Dflush(dataset), path_);
}

void DiagFile::appendRouter(const RouterRow& row) {
    if (router_.experts == 0) return;
    // A row of the run's shape (a step without one, zeros: the tables stay aligned with /steps).
    const auto fitted = [](std::vector<double> values, std::size_t size) {
        values.resize(size, 0.0);
        return values;
    };
    const std::size_t blocks = router_.blocks, loads = blocks * router_.experts;
    append(routerBalance_, H5T_NATIVE_DOUBLE, fitted(row.balance, blocks).data(), blocks);
    append(routerZ_, H5T_NATIVE_DOUBLE, fitted(row.z, blocks).data(), blocks);
    append(expertLoad_, H5T_NATIVE_DOUBLE, fitted(row.load, loads).data(), loads);
}

void DiagFile::step(const StepRecord& record, const std::vector<std::uint64_t>& sourceTokens, const RouterRow& router) {
    h5::LibraryLock lock(h5::libraryMutex());
    appendRouter(router);
    append(steps_, stepType_, &record);
    lastStep_ = record.step;
    std::vector<std::uint64_t> row(std::max<std::size_t>(sources_, 1), 0);
    std::copy(sourceTokens.begin(), sourceTokens.begin() + std::min(sourceTokens.size(), row.size()), row.begin());
    append(sourceTokens_, H5T_NATIVE_UINT64, row.data(), row.size());
}

void fitText(char* field, std::size_t size, const std::string& text) {
    if (size == 0) return;
    std::memset(field, 0, size);
    if (text.size() < size) {
        std::memcpy(field, text.data(), text.size());
        return;
    }
    // The marker's own length depends on the count it shows: settle both.
    std::size_t kept = size - 1, cut = 0;
    std::string marker;
    for (int i = 0; i < 3; ++i) {
        cut = text.size() - kept;
        marker = "...[+" + std::to_string(cut) + "]";
        kept = size - 1 >= marker.size() ? size - 1 - marker.size() : 0;
    }
    const std::string shown = text.substr(0, kept) + marker;
    std::memcpy(field, shown.data(), std::min(shown.size(), size - 1));
}

void DiagFile::event(std::uint64_t step, const std::string& kind, const std::string& detail) {
    // Every kind is in the reference (diagEventKinds): one that is not is kiln's bug, found by any test that records it.
    if (!isDiagEventKind(kind)) throw std::logic_error("diag.h5 event kind '" + kind + "' is not in diagEventKinds()");
    h5::LibraryLock lock(h5::libraryMutex());
    EventRecord e;
    e.time = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    e.step = step;
    fitText(e.kind, kind);
    fitText(e.detail, detail);
    append(events_, eventType_, &e);
}

void DiagFile::instantiation(const InstantiationRecord& record) {
    h5::LibraryLock lock(h5::libraryMutex());
    InstantiationRecord r = record;
    r.time = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    append(instantiations_, instantiationType_, &r);
}

void DiagFile::failure(const FailureRecord& record) {
    h5::LibraryLock lock(h5::libraryMutex());
    FailureRecord r = record;
    r.time = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    append(failures_, failureType_, &r);
}

void DiagFile::setFailureCause(std::size_t row, const std::string& cause) {
    auto rows = readFailures(file_);
    if (row >= rows.size()) return;
    h5::LibraryLock lock(h5::libraryMutex());
    fitText(rows[row].cause, cause);
    h5::Handle space(KILN_H5(H5Dget_space(failures_), path_));
    const hsize_t start[1] = {row}, count[1] = {1};
    KILN_H5(H5Sselect_hyperslab(space, H5S_SELECT_SET, start, nullptr, count, nullptr), path_);
    h5::Handle memSpace(KILN_H5(H5Screate_simple(1, count, nullptr), path_));
    KILN_H5(H5Dwrite(failures_, failureType_, memSpace, space, H5P_DEFAULT, &rows[row]), path_);
    KILN_H5(H5Dflush(failures_), path_);
}

void DiagFile::evaluation(const EvalRecord& record) {
    h5::LibraryLock lock(h5::libraryMutex());
    EvalRecord r = record;
    r.time = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    append(evals_, evalType_, &r);
}

std::vector<EvalRecord> DiagFile::readEvals(hid_t file) {
    h5::LibraryLock lock(h5::libraryMutex());
    return h5::readRecords<EvalRecord>(file, "eval", evalRecord(), "diag", /*optional=*/true);
}

std::vector<FailureRecord> DiagFile::readFailures(hid_t file) {
    h5::LibraryLock lock(h5::libraryMutex());
    return h5::readRecords<FailureRecord>(file, "failures", failureRecord(), "diag", /*optional=*/true);
}

std::vector<InstantiationRecord> DiagFile::readInstantiations(hid_t file) {
    h5::LibraryLock lock(h5::libraryMutex());
    return h5::readRecords<InstantiationRecord>(file, "instantiations", instantiationRecord(), "diag", /*optional=*/true);
}

std::vector<TemplateStageRecord> DiagFile::readTemplates(hid_t file) {
    h5::LibraryLock lock(h5::libraryMutex());
    return h5::readRecords<TemplateStageRecord>(file, "templates", templateRecord(), "diag", /*optional=*/true);
}

std::vector<StepRecord> DiagFile::readSteps(hid_t file) {
    h5::LibraryLock lock(h5::libraryMutex());
    return h5::readRecords<StepRecord>(file, "steps", stepRecord(), "diag", /*optional=*/true);
}

std::vector<EventRecord> DiagFile::readEvents(hid_t file) {
    h5::LibraryLock lock(h5::libraryMutex());
    return h5::readRecords<EventRecord>(file, "events", eventRecord(), "diag", /*optional=*/true);
}

namespace {

// A (rows, columns) table of diag.h5 as rows of `T` (HDF5 converts to `memType`).
template <typename T>
std::vector<std::vector<T>> readMatrix(hid_t set, hid_t memType) {
    h5::Handle space(KILN_H5(H5Dget_space(set), "diag"));
    hsize_t dims[2] = {0, 0};
    KILN_H5(H5Sget_simple_extent_dims(space, dims, nullptr), "diag");
    std::vector<T> flat(dims[0] * dims[1]);
    if (!flat.empty()) KILN_H5(H5Dread(set, memType, H5S_ALL, H5S_ALL, H5P_DEFAULT, flat.data()), "diag");
    std::vector<std::vector<T>> rows(dims[0]);
    for (hsize_t r = 0; r < dims[0]; ++r) rows[r].assign(flat.begin() + r * dims[1], flat.begin() + (r + 1) * dims[1]);
    return rows;
}

std::vector<std::vector<double>> readMatrix(hid_t file, const char* name) {
    h5::Handle set(KILN_H5(H5Dopen2(file, name, H5P_DEFAULT), "diag"));
    return readMatrix<double>(set, H5T_NATIVE_DOUBLE);
}

}  // namespace

std::vector<std::vector<std::uint64_t>> DiagFile::readSourceTokens(hid_t file, std::vector<std::string>& sources) {
    h5::LibraryLock lock(h5::libraryMutex());
    h5::Handle set(KILN_H5(H5Dopen2(file, "source_tokens", H5P_DEFAULT), "diag"));
    std::istringstream names(h5::readStringAttribute(set, "sources", "diag"));
    sources.clear();
    for (std::string line; std::getline(names, line);) sources.push_back(line);
    return readMatrix<std::uint64_t>(set, H5T_NATIVE_UINT64);
}

std::vector<RouterRow> DiagFile::readRouter(hid_t file, RouterShape& shape) {
    h5::LibraryLock lock(h5::libraryMutex());
    shape = {};
    if (H5Lexists(file, "expert_load", H5P_DEFAULT) <= 0) return {};
    {
        h5::Handle set(KILN_H5(H5Dopen2(file, "expert_load", H5P_DEFAULT), "diag"));
        shape.blocks = static_cast<std::uint32_t>(h5::readUintAttribute(set, "blocks", "diag"));
        shape.experts = static_cast<std::uint32_t>(h5::readUintAttribute(set, "experts", "diag"));
    }
    const auto balance = readMatrix(file, "router_balance"), z = readMatrix(file, "router_z"), load = readMatrix(file, "expert_load");
    std::vector<RouterRow> rows;
    for (std::size_t r = 0; r < std::min({balance.size(), z.size(), load.size()}); ++r) rows.push_back({balance[r], z[r], load[r]});
    return rows;
}

}  // namespace kiln::io
