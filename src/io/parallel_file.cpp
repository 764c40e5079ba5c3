#include "kiln/io/parallel_file.hpp"

#include "kiln/base/error.hpp"
#include "kiln/comm/mpi_check.hpp"
#include "kiln/io/atomic_file.hpp"
#include "kiln/io/hdf5_array.hpp"

#include <fmt/format.h>

#include <filesystem>

namespace kiln::io {

ParallelFileWriter::ParallelFileWriter(MPI_Comm comm, std::string path) : comm_(comm), path_(std::move(path)) {
    KILN_MPI(MPI_Comm_rank(comm, &rank_));
    temporary_ = temporarySibling(path_).string();
    // Every rank must open the same temporary: take rank 0's name.
    int length = static_cast<int>(temporary_.size());
    KILN_MPI(MPI_Bcast(&length, 1, MPI_INT, 0, comm));
    temporary_.resize(static_cast<std::size_t>(length));
    KILN_MPI(MPI_Bcast(temporary_.data(), length, MPI_CHAR, 0, comm));
    if (rank_ == 0 && !std::filesystem::path(path_).parent_path().empty())
        std::filesystem::create_directories(std::filesystem::path(path_).parent_path());
    KILN_MPI(MPI_Barrier(comm));
    h5::LibraryLock lock(h5::libraryMutex());
    h5::quietErrors();
    h5::Handle access(KILN_H5(H5Pcreate(H5P_FILE_ACCESS), path_));
    KILN_H5(H5Pset_fapl_mpio(access, comm, MPI_INFO_NULL), path_);
    file_ = h5::Handle(KILN_H5(H5Fcreate(temporary_.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, access), temporary_));
}

ParallelFileWriter::~ParallelFileWriter() {
    if (committed_) return;
    h5::LibraryLock lock(h5::libraryMutex());
    file_.reset();
    std::error_code ignored;
    if (rank_ == 0) std::filesystem::remove(temporary_, ignored);
}

void ParallelFileWriter::commit() {
    {
        h5::LibraryLock lock(h5::libraryMutex());
        file_.reset();  // collective close: all data is on disk
    }
    KILN_MPI(MPI_Barrier(comm_));
    if (rank_ == 0) commitTemporary(temporary_, path_);
    committed_ = true;
    KILN_MPI(MPI_Barrier(comm_));
}

h5::Handle openForReading(const std::string& path, const std::string& what) {
    h5::LibraryLock lock(h5::libraryMutex());
    h5::quietErrors();
    if (!std::filesystem::exists(path)) throw InputError(fmt::format("{} {}: no such file", what, path));
    h5::Handle file = h5::openReadOnly(path);
    if (!file.valid())
        throw InputError(fmt::format("{} {}: cannot be read: the file is truncated or is not HDF5 ({} bytes)", what, path,
                                     std::filesystem::file_size(path)));
    return file;
}

}  // namespace kiln::io
