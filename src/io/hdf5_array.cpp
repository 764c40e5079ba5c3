#include "kiln/io/hdf5_array.hpp"

#include "kiln/base/error.hpp"

#include <fmt/format.h>

namespace kiln::io::h5 {
namespace {

std::vector<hsize_t> sizes(const std::vector<std::uint64_t>& values) { return {values.begin(), values.end()}; }

}  // namespace

Handle createFile(const std::string& path, const std::string& context, std::uint64_t metadataBlock) {
    Handle access;
    if (metadataBlock > 0) {
        access = Handle(KILN_H5(H5Pcreate(H5P_FILE_ACCESS), context));
        KILN_H5(H5Pset_meta_block_size(access, metadataBlock), context);
    }
    return Handle(KILN_H5(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, access.valid() ? access.id() : H5P_DEFAULT),
                          context));
}

Handle openReadOnly(const std::string& path) { return Handle(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT)); }

void flush(hid_t file, const std::string& context) { KILN_H5(H5Fflush(file, H5F_SCOPE_GLOBAL), context); }

bool exists(hid_t where, const std::string& name) { return H5Lexists(where, name.c_str(), H5P_DEFAULT) > 0; }

Handle createGroup(hid_t where, const std::string& name, const std::string& context) {
    return Handle(KILN_H5(H5Gcreate2(where, name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), context));
}

Handle openGroup(hid_t where, const std::string& name, const std::string& context) {
    if (!exists(where, name))
        throw InputError(fmt::format("{}: group {} is missing", context, name), ErrorScope::ThisRank);
    return Handle(KILN_H5(H5Gopen2(where, name.c_str(), H5P_DEFAULT), context));
}

Handle openDataset(hid_t where, const std::string& name, const std::string& context) {
    if (!exists(where, name)) missingDataset(context, name.c_str());
    return Handle(KILN_H5(H5Dopen2(where, name.c_str(), H5P_DEFAULT), context));
}

std::vector<std::uint64_t> extent(hid_t dataset, const std::string& context) {
    Handle space(KILN_H5(H5Dget_space(dataset), context));
    const int rank = static_cast<int>(KILN_H5(H5Sget_simple_extent_ndims(space), context));
    std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
    if (rank > 0) KILN_H5(H5Sget_simple_extent_dims(space, dims.data(), nullptr), context);
    return {dims.begin(), dims.end()};
}

bool storedAs(hid_t dataset, hid_t fileType, const std::string& context) {
    Handle type(KILN_H5(H5Dget_type(dataset), context));
    return KILN_H5(H5Tequal(type, fileType), context) > 0;
}

std::optional<std::uint64_t> byteOffset(hid_t file, hid_t dataset, const std::string& context) {
    Handle create(KILN_H5(H5Fget_create_plist(file), context));
    hsize_t userBlock = 1;
    KILN_H5(H5Pget_userblock(create, &userBlock), context);
    const haddr_t at = H5Dget_offset(dataset);
    if (at == HADDR_UNDEF || userBlock != 0) return std::nullopt;
    return static_cast<std::uint64_t>(at);
}

Handle createArray(hid_t where, const std::string& name, hid_t fileType, const std::vector<std::uint64_t>& dims,
                   Storage storage, const std::string& context) {
    const auto shape = sizes(dims);
    Handle space(KILN_H5(H5Screate_simple(static_cast<int>(shape.size()), shape.data(), nullptr), context));
    Handle create(KILN_H5(H5Pcreate(H5P_DATASET_CREATE), context));
    if (storage == Storage::ContiguousAllocated) {
        KILN_H5(H5Pset_layout(create, H5D_CONTIGUOUS), context);
        KILN_H5(H5Pset_alloc_time(create, H5D_ALLOC_TIME_EARLY), context);
    }
    return Handle(KILN_H5(H5Dcreate2(where, name.c_str(), fileType, space, H5P_DEFAULT, create, H5P_DEFAULT), context));
}

Handle createChecksummedArray(hid_t where, const std::string& name, hid_t fileType, const std::vector<std::uint64_t>& dims,
                              const std::vector<std::uint64_t>& chunk, const std::string& context) {
    const auto shape = sizes(dims), chunkShape = sizes(chunk);
    Handle space(KILN_H5(H5Screate_simple(static_cast<int>(shape.size()), shape.data(), nullptr), context));
    Handle create(KILN_H5(H5Pcreate(H5P_DATASET_CREATE), context));
    KILN_H5(H5Pset_chunk(create, static_cast<int>(chunkShape.size()), chunkShape.data()), context);
    KILN_H5(H5Pset_fletcher32(create), context);
    return Handle(KILN_H5(H5Dcreate2(where, name.c_str(), fileType, space, H5P_DEFAULT, create, H5P_DEFAULT), context));
}

Handle tryOpenDataset(hid_t where, const std::string& name) {
    if (!exists(where, name)) return {};
    return Handle(H5Dopen2(where, name.c_str(), H5P_DEFAULT));
}

Handle tryOpenGroup(hid_t where, const std::string& name) {
    if (!exists(where, name)) return {};
    return Handle(H5Gopen2(where, name.c_str(), H5P_DEFAULT));
}

void linkExternal(hid_t file, const std::string& name, const std::string& target, const std::string& object,
                  const std::string& context) {
    KILN_H5(H5Lcreate_external(target.c_str(), object.c_str(), file, name.c_str(), H5P_DEFAULT, H5P_DEFAULT), context);
}

std::string externalTarget(hid_t file, const std::string& name) {
    H5L_info_t info;
    if (H5Lget_info(file, name.c_str(), &info, H5P_DEFAULT) < 0 || info.type != H5L_TYPE_EXTERNAL) return "";
    std::vector<char> value(info.u.val_size);
    if (H5Lget_val(file, name.c_str(), value.data(), value.size(), H5P_DEFAULT) < 0) return "";
    const char* target = nullptr;
    const char* object = nullptr;
    unsigned flags = 0;
    if (H5Lunpack_elink_val(value.data(), value.size(), &flags, &target, &object) < 0) return "";
    return target;
}

bool tryReadAll(hid_t dataset, hid_t memoryType, void* data) {
    return H5Dread(dataset, memoryType, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0;
}

Handle createGrowingArray(hid_t where, const std::string& name, hid_t fileType, std::uint64_t chunk,
                          const std::string& context) {
    hsize_t dims[1] = {0}, maxDims[1] = {H5S_UNLIMITED}, chunkDims[1] = {chunk};
    Handle space(KILN_H5(H5Screate_simple(1, dims, maxDims), context));
    Handle create(KILN_H5(H5Pcreate(H5P_DATASET_CREATE), context));
    KILN_H5(H5Pset_chunk(create, 1, chunkDims), context);
    KILN_H5(H5Pset_fletcher32(create), context);
    return Handle(KILN_H5(H5Dcreate2(where, name.c_str(), fileType, space, H5P_DEFAULT, create, H5P_DEFAULT), context));
}

void appendBlock(hid_t dataset, hid_t memoryType, std::uint64_t at, std::uint64_t count, const void* data,
                 const std::string& context) {
    hsize_t newSize[1] = {at + count};
    KILN_H5(H5Dset_extent(dataset, newSize), context);
    writeBlock(dataset, memoryType, {at}, {count}, data, Transfer::Independent, context);
}

void flushDataset(hid_t dataset, const std::string& context) { KILN_H5(H5Dflush(dataset), context); }

void writeBlock(hid_t dataset, hid_t memoryType, const std::vector<std::uint64_t>& first,
                const std::vector<std::uint64_t>& count, const void* data, Transfer transfer, const std::string& context) {
    const auto start = sizes(first), counts = sizes(count);
    Handle fileSpace(KILN_H5(H5Dget_space(dataset), context));
    KILN_H5(H5Sselect_hyperslab(fileSpace, H5S_SELECT_SET, start.data(), nullptr, counts.data(), nullptr), context);
    Handle memSpace(KILN_H5(H5Screate_simple(static_cast<int>(counts.size()), counts.data(), nullptr), context));
    // A transfer property list only for a collective write: independent ones (a shard's every chunk) take the default.
    Handle collective;
    if (transfer == Transfer::Collective) {
        collective = Handle(KILN_H5(H5Pcreate(H5P_DATASET_XFER), context));
        KILN_H5(H5Pset_dxpl_mpio(collective, H5FD_MPIO_COLLECTIVE), context);
    }
    KILN_H5(H5Dwrite(dataset, memoryType, memSpace, fileSpace, collective.valid() ? collective.id() : H5P_DEFAULT, data),
            context);
}

void readBlock(hid_t dataset, hid_t memoryType, const std::vector<std::uint64_t>& first,
               const std::vector<std::uint64_t>& count, void* data, const std::string& context) {
    const auto start = sizes(first), counts = sizes(count);
    Handle fileSpace(KILN_H5(H5Dget_space(dataset), context));
    KILN_H5(H5Sselect_hyperslab(fileSpace, H5S_SELECT_SET, start.data(), nullptr, counts.data(), nullptr), context);
    Handle memSpace(KILN_H5(H5Screate_simple(static_cast<int>(counts.size()), counts.data(), nullptr), context));
    KILN_H5(H5Dread(dataset, memoryType, memSpace, fileSpace, H5P_DEFAULT, data), context);
}

}  // namespace kiln::io::h5
