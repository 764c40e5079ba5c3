// Flips one bit of the bytes stored on disk for chunk `chunk` of /tokens,
// `at` bytes into it, as a failing disk would (not through HDF5, which would
// recompute the chunk's checksum). Throws std::runtime_error when the chunk
// cannot be found.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

namespace kiln::test {

inline void flipStoredBit(const std::filesystem::path& shard, hsize_t chunk, std::uint64_t at) {
    const hid_t file = H5Fopen(shard.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    const hid_t set = H5Dopen2(file, "tokens", H5P_DEFAULT);
    const hid_t space = H5Dget_space(set);
    hsize_t offset[1] = {0}, size = 0;
    unsigned mask = 0;
    haddr_t address = 0;
    const herr_t found = H5Dget_chunk_info(set, space, chunk, offset, &mask, &address, &size);
    H5Sclose(space);
    H5Dclose(set);
    H5Fclose(file);
    if (found < 0 || at >= size)
        throw std::runtime_error("no byte " + std::to_string(at) + " in chunk " + std::to_string(chunk) + " of " +
                                 shard.string());
    std::fstream bytes(shard, std::ios::in | std::ios::out | std::ios::binary);
    bytes.seekg(static_cast<std::streamoff>(address + at));
    char b = 0;
    bytes.read(&b, 1);
    b = static_cast<char>(b ^ 0x40);
    bytes.seekp(static_cast<std::streamoff>(address + at));
    bytes.write(&b, 1);
}

}  // namespace kiln::test
