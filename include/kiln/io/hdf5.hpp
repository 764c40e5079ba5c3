// Checked HDF5: every call goes through KILN_H5, which turns a negative
// return into an error naming the call, the file it concerns, the rank and
// HDF5's own message; handles close themselves.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace kiln::io::h5 {

// Owns one HDF5 identifier and closes it with the matching H5?close.
class Handle {
public:
    Handle() = default;
    explicit Handle(hid_t id) : id_(id) {}
    ~Handle() { reset(); }
    Handle(Handle&& other) noexcept : id_(other.id_) { other.id_ = H5I_INVALID_HID; }
    Handle& operator=(Handle&& other) noexcept {
        if (this != &other) {
            reset();
            id_ = other.id_;
            other.id_ = H5I_INVALID_HID;
        }
        return *this;
    }
    Handle(const Handle&) = delete;
    Handle& operator=(const Handle&) = delete;

    hid_t id() const { return id_; }
    operator hid_t() const { return id_; }
    bool valid() const { return id_ >= 0; }
    void reset();

private:
    hid_t id_ = H5I_INVALID_HID;
};

// Debian's parallel HDF5 is not built thread-safe: every thread that calls
// HDF5 (the loader's prefetch thread, the training thread writing checkpoints
// and diagnostics) holds this lock around its calls.
std::recursive_mutex& libraryMutex();
using LibraryLock = std::lock_guard<std::recursive_mutex>;

// Silences HDF5's own error printing (kiln reports errors itself). Idempotent.
void quietErrors();

// Closes every HDF5 object still open and the library, flushing what they hold (what HDF5's own exit handler
// does), for a process that ends without running exit handlers.
void closeLibrary();

// Throws LibraryError (this rank) unless `rc >= 0`. `context` names the file or object.
std::int64_t check(std::int64_t rc, const char* call, const std::string& context, const char* file, int line);

#define KILN_H5(call, context) ::kiln::io::h5::check((call), #call, (context), __FILE__, __LINE__)

// A fixed-length string type of `size` bytes (at least 1), for attributes and table columns.
Handle fixedString(std::size_t size, const std::string& context);

// Attributes on a file, group or dataset.
void writeAttribute(hid_t object, const std::string& name, const std::string& value);
void writeAttribute(hid_t object, const std::string& name, std::int64_t value);
void writeAttribute(hid_t object, const std::string& name, std::uint64_t value);
void writeAttribute(hid_t object, const std::string& name, double value);
bool hasAttribute(hid_t object, const std::string& name);
std::string readStringAttribute(hid_t object, const std::string& name, const std::string& context);
std::int64_t readIntAttribute(hid_t object, const std::string& name, const std::string& context);
std::uint64_t readUintAttribute(hid_t object, const std::string& name, const std::string& context);
double readRealAttribute(hid_t object, const std::string& name, const std::string& context);

// Length of a 1-D dataset.
std::uint64_t extent1d(hid_t dataset, const std::string& context);

// Throws InputError: `context` has no dataset `name`.
[[noreturn]] void missingDataset(const std::string& context, const char* name);

// A 1-D dataset of records of compound type `type` (a table), written whole.
template <typename Row>
Handle writeRecords(hid_t where, const char* name, hid_t type, const std::vector<Row>& rows, const std::string& context) {
    hsize_t dims[1] = {rows.size()};
    Handle space(KILN_H5(H5Screate_simple(1, dims, nullptr), context));
    Handle set(KILN_H5(H5Dcreate2(where, name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), context));
    if (!rows.empty()) KILN_H5(H5Dwrite(set, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows.data()), context);
    return set;
}

// All records of a table; a missing table is an error, or no records when `optional`.
template <typename Row>
std::vector<Row> readRecords(hid_t where, const char* name, hid_t type, const std::string& context, bool optional = false) {
    if (H5Lexists(where, name, H5P_DEFAULT) <= 0) {
        if (optional) return {};
        missingDataset(context, name);
    }
    Handle set(KILN_H5(H5Dopen2(where, name, H5P_DEFAULT), context));
    Handle space(KILN_H5(H5Dget_space(set), context));
    std::vector<Row> rows(static_cast<std::size_t>(H5Sget_simple_extent_npoints(space)));
    if (!rows.empty()) KILN_H5(H5Dread(set, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows.data()), context);
    return rows;
}

}  // namespace kiln::io::h5
