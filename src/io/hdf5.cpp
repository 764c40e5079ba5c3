#include "kiln/io/hdf5.hpp"

#include <algorithm>

#include "kiln/base/error.hpp"
#include "kiln/base/log.hpp"
#include "kiln/io/hdf5_array.hpp"

#include <fmt/format.h>

namespace kiln::io::h5 {
namespace {

// The innermost message of HDF5's error stack: the most specific cause.
std::string hdf5Message() {
    std::string message;
    H5Ewalk2(
        H5E_DEFAULT, H5E_WALK_UPWARD,
        [](unsigned n, const H5E_error2_t* e, void* data) -> herr_t {
            if (n == 0 && e->desc) *static_cast<std::string*>(data) = e->desc;
            return 0;
        },
        &message);
    H5Eclear2(H5E_DEFAULT);
    return message.empty() ? "no detail from HDF5" : message;
}

}  // namespace

void Handle::reset() {
    if (id_ < 0) return;
    // A close is an HDF5 call like any other: a file closed by a handle that outlived its reader's lock raced the
    // loader's prefetch thread (a resumed run crashed in the close of diag.h5 after its spike history was read).
    LibraryLock lock(libraryMutex());
    switch (H5Iget_type(id_)) {
        case H5I_FILE: H5Fclose(id_); break;
        case H5I_GROUP: H5Gclose(id_); break;
        case H5I_DATASET: H5Dclose(id_); break;
        case H5I_DATASPACE: H5Sclose(id_); break;
        case H5I_DATATYPE: H5Tclose(id_); break;
        case H5I_ATTR: H5Aclose(id_); break;
        case H5I_GENPROP_LST: H5Pclose(id_); break;
        default: break;
    }
    id_ = H5I_INVALID_HID;
}

std::recursive_mutex& libraryMutex() {
    static std::recursive_mutex mutex;
    return mutex;
}

void closeLibrary() {
    const LibraryLock lock(libraryMutex());
    H5close();
}

void quietErrors() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

std::int64_t check(std::int64_t rc, const char* call, const std::string& context, const char* file, int line) {
    if (rc >= 0) return rc;
    throw LibraryError(fmt::format("{}: {} failed on rank {} ({}) at {}:{}: {}", context, call, log::rank(), log::host(),
                                   file, line, hdf5Message()));
}

Handle fixedString(std::size_t size, const std::string& context) {
    Handle type(KILN_H5(H5Tcopy(H5T_C_S1), context));
    KILN_H5(H5Tset_size(type, std::max<std::size_t>(size, 1)), context);
    return type;
}

void writeAttribute(hid_t object, const std::string& name, const std::string& value) {
    Handle type = fixedString(value.size(), name);
    Handle space(KILN_H5(H5Screate(H5S_SCALAR), name));
    Handle attr(KILN_H5(H5Acreate2(object, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT), name));
    KILN_H5(H5Awrite(attr, type, value.empty() ? "" : value.c_str()), name);
}

void writeAttribute(hid_t object, const std::string& name, std::int64_t value) {
    Handle space(KILN_H5(H5Screate(H5S_SCALAR), name));
    Handle attr(KILN_H5(H5Acreate2(object, name.c_str(), H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT), name));
    KILN_H5(H5Awrite(attr, H5T_NATIVE_INT64, &value), name);
}

void writeAttribute(hid_t object, const std::string& name, std::uint64_t value) {
    Handle space(KILN_H5(H5Screate(H5S_SCALAR), name));
    Handle attr(KILN_H5(H5Acreate2(object, name.c_str(), H5T_STD_U64LE, space, H5P_DEFAULT, H5P_DEFAULT), name));
    KILN_H5(H5Awrite(attr, H5T_NATIVE_UINT64, &value), name);
}

void writeAttribute(hid_t object, const std::string& name, double value) {
    Handle space(KILN_H5(H5Screate(H5S_SCALAR), name));
    Handle attr(KILN_H5(H5Acreate2(object, name.c_str(), H5T_IEEE_F64LE, space, H5P_DEFAULT, H5P_DEFAULT), name));
    KILN_H5(H5Awrite(attr, H5T_NATIVE_DOUBLE, &value), name);
}

bool hasAttribute(hid_t object, const std::string& name) { return H5Aexists(object, name.c_str()) > 0; }

namespace {

// Opens attribute `name`, or says it is missing.
Handle openAttribute(hid_t object, const std::string& name, const std::string& context) {
    if (!hasAttribute(object, name))
        throw InputError(fmt::format("{}: attribute '{}' is missing", context, name), ErrorScope::ThisRank);
    return Handle(KILN_H5(H5Aopen(object, name.c_str(), H5P_DEFAULT), context));
}

template <typename T>
T readScalarAttribute(hid_t object, const std::string& name, hid_t memType, const std::string& context) {
    Handle attr = openAttribute(object, name, context);
    T value{};
    KILN_H5(H5Aread(attr, memType, &value), context);
    return value;
}

}  // namespace

std::string readStringAttribute(hid_t object, const std::string& name, const std::string& context) {
    Handle attr = openAttribute(object, name, context);
    Handle type(KILN_H5(H5Aget_type(attr), context));
    if (H5Tget_class(type) != H5T_STRING)
        throw InputError(fmt::format("{}: attribute '{}' is not a string", context, name), ErrorScope::ThisRank);
    const std::size_t size = H5Tget_size(type);
    std::string value(size, '\0');
    Handle memType = fixedString(size, context);
    KILN_H5(H5Aread(attr, memType, value.data()), context);
    value.resize(value.find('\0') == std::string::npos ? size : value.find('\0'));
    return value;
}

std::int64_t readIntAttribute(hid_t object, const std::string& name, const std::string& context) {
    return readScalarAttribute<std::int64_t>(object, name, H5T_NATIVE_INT64, context);
}

std::uint64_t readUintAttribute(hid_t object, const std::string& name, const std::string& context) {
    return readScalarAttribute<std::uint64_t>(object, name, H5T_NATIVE_UINT64, context);
}

double readRealAttribute(hid_t object, const std::string& name, const std::string& context) {
    return readScalarAttribute<double>(object, name, H5T_NATIVE_DOUBLE, context);
}

void missingDataset(const std::string& context, const char* name) {
    throw InputError(fmt::format("{}: dataset /{} is missing", context, name), ErrorScope::ThisRank);
}

std::uint64_t extent1d(hid_t dataset, const std::string& context) {
    const auto dims = extent(dataset, context);
    if (dims.size() != 1) throw InputError(fmt::format("{}: expected a 1-D dataset", context), ErrorScope::ThisRank);
    return dims[0];
}

}  // namespace kiln::io::h5
