// Debian's parallel HDF5 (built against Open MPI 4.1) used through Open MPI 5:
// a collective write from every rank into one dataset, read back on every rank.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <mpi.h>

#include <string>
#include <vector>

TEST(ParallelHdf5, CollectiveWriteReadBack) {
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    std::string path = "parallel_hdf5_test.h5";

    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    ASSERT_GE(H5Pset_fapl_mpio(fapl, MPI_COMM_WORLD, MPI_INFO_NULL), 0);
    hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    ASSERT_GE(file, 0);
    constexpr hsize_t kCols = 1000;
    hsize_t dims[2] = {static_cast<hsize_t>(size), kCols};
    hid_t space = H5Screate_simple(2, dims, nullptr);
    hid_t dset = H5Dcreate2(file, "rows", H5T_NATIVE_INT64, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    ASSERT_GE(dset, 0);
    hsize_t start[2] = {static_cast<hsize_t>(rank), 0}, count[2] = {1, kCols};
    H5Sselect_hyperslab(space, H5S_SELECT_SET, start, nullptr, count, nullptr);
    hid_t memspace = H5Screate_simple(2, count, nullptr);
    hid_t xfer = H5Pcreate(H5P_DATASET_XFER);
    H5Pset_dxpl_mpio(xfer, H5FD_MPIO_COLLECTIVE);
    std::vector<long long> row(kCols);
    for (hsize_t c = 0; c < kCols; ++c) row[c] = rank * 1000000LL + static_cast<long long>(c);
    EXPECT_GE(H5Dwrite(dset, H5T_NATIVE_INT64, memspace, space, xfer, row.data()), 0);
    H5Pclose(xfer);
    H5Sclose(memspace);
    H5Sclose(space);
    H5Dclose(dset);
    H5Fclose(file);
    H5Pclose(fapl);
    MPI_Barrier(MPI_COMM_WORLD);

    hid_t readFile = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    ASSERT_GE(readFile, 0);
    hid_t readSet = H5Dopen2(readFile, "rows", H5P_DEFAULT);
    std::vector<long long> all(static_cast<std::size_t>(size) * kCols, -1);
    ASSERT_GE(H5Dread(readSet, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, all.data()), 0);
    H5Dclose(readSet);
    H5Fclose(readFile);
    for (int r = 0; r < size; ++r)
        for (hsize_t c = 0; c < kCols; ++c)
            ASSERT_EQ(all[r * kCols + c], r * 1000000LL + static_cast<long long>(c)) << "row " << r << " col " << c;
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) std::remove(path.c_str());
}
