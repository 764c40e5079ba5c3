#include "batch_dump.hpp"

#include "kiln/base/error.hpp"
#include "kiln/comm/mpi_check.hpp"
#include "kiln/data/loader.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace kiln::apps {
namespace {

// NumPy's format 1.0: magic, version, a little-endian header length, then a
// Python dict literal padded with spaces to a multiple of 64 bytes.
std::string npyHeader(std::uint64_t steps, std::uint64_t globalBatch, std::uint64_t sampleLength) {
    std::string dict = fmt::format("{{'descr': '<u4', 'fortran_order': False, 'shape': ({}, {}, {}), }}", steps,
                                   globalBatch, sampleLength);
    const std::size_t prefix = 10;
    const std::size_t total = (prefix + dict.size() + 1 + 63) / 64 * 64;
    dict.append(total - prefix - dict.size() - 1, ' ');
    dict += '\n';
    std::string header("\x93NUMPY\x01\x00", 8);
    header += static_cast<char>(dict.size() & 0xff);
    header += static_cast<char>(dict.size() >> 8);
    return header + dict;
}

}  // namespace

BatchDump::BatchDump(MPI_Comm comm, const std::string& path, std::uint64_t steps, std::uint64_t globalBatch,
                     std::uint64_t sampleLength)
    : comm_(comm), path_(path), expected_(steps) {
    int rank = 0;
    KILN_MPI(MPI_Comm_rank(comm_, &rank));
    std::string problem;
    if (rank == 0) {
        file_ = std::fopen(path.c_str(), "wb");
        const std::string header = npyHeader(steps, globalBatch, sampleLength);
        if (!file_ || std::fwrite(header.data(), 1, header.size(), file_) != header.size())
            problem = fmt::format("{}: cannot write the batch dump: {}", path, std::strerror(errno));
    }
    int failed = problem.empty() ? 0 : 1;
    KILN_MPI(MPI_Bcast(&failed, 1, MPI_INT, 0, comm_));
    if (failed) throw InputError(problem.empty() ? fmt::format("{}: rank 0 cannot write the batch dump", path) : problem);
}

BatchDump::~BatchDump() {
    if (file_) std::fclose(file_);
}

void BatchDump::append(const data::Batch& slice) {
    int rank = 0, size = 1;
    KILN_MPI(MPI_Comm_rank(comm_, &rank));
    KILN_MPI(MPI_Comm_size(comm_, &size));
    const int count = static_cast<int>(slice.count * slice.sampleLength);
    std::vector<int> counts(static_cast<std::size_t>(size)), offsets(static_cast<std::size_t>(size));
    KILN_MPI(MPI_Gather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, comm_));
    std::vector<std::uint32_t> all;
    if (rank == 0) {
        for (int r = 1; r < size; ++r) offsets[r] = offsets[r - 1] + counts[r - 1];
        all.resize(static_cast<std::size_t>(offsets.back() + counts.back()));
    }
    KILN_MPI(MPI_Gatherv(slice.tokens.data(), count, MPI_UINT32_T, all.data(), counts.data(), offsets.data(),
                         MPI_UINT32_T, 0, comm_));
    int failed = 0;
    if (rank == 0 && std::fwrite(all.data(), sizeof(std::uint32_t), all.size(), file_) != all.size()) failed = 1;
    KILN_MPI(MPI_Bcast(&failed, 1, MPI_INT, 0, comm_));
    if (failed) throw InputError(fmt::format("{}: writing step {} of the batch dump failed", path_, slice.step));
    ++written_;
}

void BatchDump::close() {
    int failed = 0;
    if (file_) {
        failed = std::fclose(file_) != 0 ? 1 : 0;
        file_ = nullptr;
    }
    KILN_MPI(MPI_Bcast(&failed, 1, MPI_INT, 0, comm_));
    if (failed) throw InputError(fmt::format("{}: closing the batch dump failed", path_));
    if (written_ != expected_)
        throw InputError(fmt::format("{}: {} of {} steps written", path_, written_, expected_));
}

}  // namespace kiln::apps
