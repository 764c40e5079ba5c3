// flip_stored_bits FILE.h5 [DATASET]: flips one bit inside every stored chunk
// of DATASET (default /tokens, a token shard's), in the file's bytes (as a
// failing disk would), not through HDF5, which would recompute the chunks'
// checksums.
#include <hdf5.h>

#include <cstdio>
#include <fstream>
#include <vector>

int main(int argc, char** argv) {
    if (argc != 2 && argc != 3) {
        std::fprintf(stderr, "usage: flip_stored_bits FILE.h5 [DATASET]\n");
        return 2;
    }
    const char* dataset = argc == 3 ? argv[2] : "tokens";
    std::vector<haddr_t> addresses;
    {
        const hid_t file = H5Fopen(argv[1], H5F_ACC_RDONLY, H5P_DEFAULT);
        if (file < 0) return 1;
        const hid_t set = H5Dopen2(file, dataset, H5P_DEFAULT);
        if (set < 0) return 1;
        const hid_t space = H5Dget_space(set);
        hsize_t chunks = 0;
        H5Dget_num_chunks(set, space, &chunks);
        for (hsize_t k = 0; k < chunks; ++k) {
            hsize_t offset[1];
            unsigned mask = 0;
            haddr_t address = 0;
            hsize_t size = 0;
            if (H5Dget_chunk_info(set, space, k, offset, &mask, &address, &size) >= 0 && size > 200)
                addresses.push_back(address + 101);
        }
        H5Sclose(space);
        H5Dclose(set);
        H5Fclose(file);
    }
    std::fstream bytes(argv[1], std::ios::in | std::ios::out | std::ios::binary);
    for (const haddr_t at : addresses) {
        char b = 0;
        bytes.seekg(static_cast<std::streamoff>(at));
        bytes.read(&b, 1);
        b = static_cast<char>(b ^ 0x40);
        bytes.seekp(static_cast<std::streamoff>(at));
        bytes.write(&b, 1);
    }
    std::printf("flipped a bit in %zu chunks of %s\n", addresses.size(), argv[1]);
    return addresses.empty() ? 1 : 0;
}
