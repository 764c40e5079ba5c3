// Typed arrays and groups, the other half of the record layer (hdf5_record.hpp): a dataset of numbers is
// created, written and read by its element type, whole or a block of rows at a time, with the transfer
// (independent or collective) named where it matters. The type on disk is the little-endian standard one of
// the element type, whatever the machine.
#pragma once

#include "kiln/io/hdf5.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kiln::io::h5 {

// The type in a file of an element type (little-endian, fixed size).
template <typename T>
hid_t fileType();
template <> inline hid_t fileType<std::uint8_t>() { return H5T_STD_U8LE; }
template <> inline hid_t fileType<std::uint16_t>() { return H5T_STD_U16LE; }
template <> inline hid_t fileType<std::int32_t>() { return H5T_STD_I32LE; }
template <> inline hid_t fileType<std::uint32_t>() { return H5T_STD_U32LE; }
template <> inline hid_t fileType<std::int64_t>() { return H5T_STD_I64LE; }
template <> inline hid_t fileType<std::uint64_t>() { return H5T_STD_U64LE; }
template <> inline hid_t fileType<float>() { return H5T_IEEE_F32LE; }
template <> inline hid_t fileType<double>() { return H5T_IEEE_F64LE; }
// Its type in memory here.
template <typename T>
hid_t memoryType();
template <> inline hid_t memoryType<std::uint8_t>() { return H5T_NATIVE_UINT8; }
template <> inline hid_t memoryType<std::uint16_t>() { return H5T_NATIVE_UINT16; }
template <> inline hid_t memoryType<std::int32_t>() { return H5T_NATIVE_INT32; }
template <> inline hid_t memoryType<std::uint32_t>() { return H5T_NATIVE_UINT32; }
template <> inline hid_t memoryType<std::int64_t>() { return H5T_NATIVE_INT64; }
template <> inline hid_t memoryType<std::uint64_t>() { return H5T_NATIVE_UINT64; }
template <> inline hid_t memoryType<float>() { return H5T_NATIVE_FLOAT; }
template <> inline hid_t memoryType<double>() { return H5T_NATIVE_DOUBLE; }

// Whether a parallel file's ranks write together (every rank calls, MPI-IO collective) or each alone.
enum class Transfer { Independent, Collective };

// How an array is stored: HDF5's default, or contiguous with its space allocated at creation, so that its
// bytes sit at a fixed offset a reader may map (doc_lengths).
enum class Storage { Default, ContiguousAllocated };

// A file created anew (truncated), serial; a parallel file is io::ParallelFileWriter's. `metadataBlock` > 0:
// HDF5 takes room for its metadata in blocks of that many bytes (one big enough keeps a file's chunks in one run).
Handle createFile(const std::string& path, const std::string& context, std::uint64_t metadataBlock = 0);
// A file opened for reading, or an invalid handle when it cannot be (the caller says what that means).
Handle openReadOnly(const std::string& path);
void flush(hid_t file, const std::string& context);

bool exists(hid_t where, const std::string& name);
Handle createGroup(hid_t where, const std::string& name, const std::string& context);
// Throws InputError naming `context` when there is no such group.
Handle openGroup(hid_t where, const std::string& name, const std::string& context);
// Throws InputError naming `context` when there is no such dataset.
Handle openDataset(hid_t where, const std::string& name, const std::string& context);
// Its extent, one entry a dimension.
std::vector<std::uint64_t> extent(hid_t dataset, const std::string& context);
// Whether its elements are stored as `fileType` (fileType<T>() below).
bool storedAs(hid_t dataset, hid_t fileType, const std::string& context);
// Where its bytes begin in `file`, for a reader that reads them without HDF5; none when they are not in one
// known place (chunked, not yet allocated, or the file has a user block).
std::optional<std::uint64_t> byteOffset(hid_t file, hid_t dataset, const std::string& context);

Handle createArray(hid_t where, const std::string& name, hid_t fileType, const std::vector<std::uint64_t>& dims,
                   Storage storage, const std::string& context);
// An N-D array stored in chunks of the shape `chunk`, each with a Fletcher-32 checksum that HDF5 verifies on
// every read (a flipped bit fails the read).
Handle createChecksummedArray(hid_t where, const std::string& name, hid_t fileType, const std::vector<std::uint64_t>& dims,
                              const std::vector<std::uint64_t>& chunk, const std::string& context);
// Opened, or an invalid handle when there is no such dataset or it cannot be opened (the caller says what that
// means).
Handle tryOpenDataset(hid_t where, const std::string& name);
Handle tryOpenGroup(hid_t where, const std::string& name);
// A link `name` in `file` to `object` of the file `target` (a path relative to `file`'s directory, where HDF5
// looks first), and the target file of such a link ("" when `name` is not an external link).
void linkExternal(hid_t file, const std::string& name, const std::string& target, const std::string& object,
                  const std::string& context);
std::string externalTarget(hid_t file, const std::string& name);

// A 1-D array that grows (appendBlock), stored in chunks of `chunk` elements, each with a Fletcher-32 checksum
// that HDF5 verifies on every read.
Handle createGrowingArray(hid_t where, const std::string& name, hid_t fileType, std::uint64_t chunk,
                          const std::string& context);
// Elements [at, at + count) of a growing array, which is extended to hold them.
void appendBlock(hid_t dataset, hid_t memoryType, std::uint64_t at, std::uint64_t count, const void* data,
                 const std::string& context);
// Its chunks written to the file now (HDF5 places a chunk only when its cache lets it go).
void flushDataset(hid_t dataset, const std::string& context);

// Rows [first, first + count[0]) of the array and all of its other dimensions (`count` a dimension each),
// from or into `data` (row-major, contiguous).
void writeBlock(hid_t dataset, hid_t memoryType, const std::vector<std::uint64_t>& first,
                const std::vector<std::uint64_t>& count, const void* data, Transfer transfer, const std::string& context);
void readBlock(hid_t dataset, hid_t memoryType, const std::vector<std::uint64_t>& first,
               const std::vector<std::uint64_t>& count, void* data, const std::string& context);

template <typename T>
Handle createArray(hid_t where, const std::string& name, const std::vector<std::uint64_t>& dims, const std::string& context,
                   Storage storage = Storage::Default) {
    return createArray(where, name, fileType<T>(), dims, storage, context);
}

// A whole array written at once (by one rank, or every rank alike).
template <typename T>
Handle writeArray(hid_t where, const std::string& name, const std::vector<std::uint64_t>& dims, const std::vector<T>& values,
                  const std::string& context) {
    Handle set = createArray<T>(where, name, dims, context);
    if (!values.empty()) writeBlock(set, memoryType<T>(), std::vector<std::uint64_t>(dims.size(), 0), dims, values.data(),
                                    Transfer::Independent, context);
    return set;
}

template <typename T>
void writeBlock(hid_t dataset, const std::vector<std::uint64_t>& first, const std::vector<std::uint64_t>& count,
                const T* data, const std::string& context, Transfer transfer = Transfer::Independent) {
    writeBlock(dataset, memoryType<T>(), first, count, data, transfer, context);
}

template <typename T>
std::vector<T> readBlock(hid_t dataset, const std::vector<std::uint64_t>& first, const std::vector<std::uint64_t>& count,
                         const std::string& context) {
    std::uint64_t n = 1;
    for (auto c : count) n *= c;
    std::vector<T> out(static_cast<std::size_t>(n));
    if (n > 0) readBlock(dataset, memoryType<T>(), first, count, out.data(), context);
    return out;
}

// The whole array into `data` (row-major, its element count), or false when it does not read back (a checksum
// mismatch, a truncated file): for a reader that reports, rather than throws.
bool tryReadAll(hid_t dataset, hid_t memoryType, void* data);

// The whole array, row-major.
template <typename T>
std::vector<T> readArray(hid_t dataset, const std::string& context) {
    const auto dims = extent(dataset, context);
    return readBlock<T>(dataset, std::vector<std::uint64_t>(dims.size(), 0), dims, context);
}

}  // namespace kiln::io::h5
