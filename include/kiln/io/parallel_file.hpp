// A new HDF5 file written by all ranks of a communicator (MPI-IO driver)
// under a temporary name that every rank agrees on, and renamed into place
// by rank 0 only once every rank has closed it: a crash at any instant leaves
// the previous file, never a partial one under the final name.
#pragma once

#include "kiln/io/hdf5.hpp"

#include <mpi.h>

#include <string>

namespace kiln::io {

class ParallelFileWriter {
public:
    ParallelFileWriter(MPI_Comm comm, std::string path);  // collective
    ~ParallelFileWriter();                                // without commit(): closes and removes the temporary
    ParallelFileWriter(const ParallelFileWriter&) = delete;
    ParallelFileWriter& operator=(const ParallelFileWriter&) = delete;

    hid_t file() const { return file_.id(); }
    int rank() const { return rank_; }
    // Closes on every rank, then rank 0 renames the file into place. Collective.
    void commit();

private:
    MPI_Comm comm_;
    std::string path_, temporary_;
    int rank_ = 0;
    h5::Handle file_;
    bool committed_ = false;
};

// Opens an existing HDF5 file read-only on this rank alone; errors name the
// file and say whether it is missing or unreadable (truncated, not HDF5).
h5::Handle openForReading(const std::string& path, const std::string& what);

}  // namespace kiln::io
