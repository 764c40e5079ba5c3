// A scratch directory that every rank of MPI_COMM_WORLD names alike (rank 0's
// process id), for MPI tests whose ranks share files. Rank 0 removes it when it
// exits normally (after MPI_Finalize, when no rank uses it any more).
#pragma once

#include "scratch_dir.hpp"

#include <mpi.h>
#include <unistd.h>

#include <filesystem>
#include <string>

namespace kiln::test {

inline std::filesystem::path sharedScratch(const std::string& prefix) {
    int pid = ::getpid();
    MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD);
    auto dir = std::filesystem::temp_directory_path() / (prefix + "-" + std::to_string(pid));
    if (pid == ::getpid()) removeAtExit(dir);
    return dir;
}

}  // namespace kiln::test
