// kiln data --dump FILE: the global batches as a NumPy array, for a reference
// implementation to train on exactly what kiln trains on (issue 38, item 4c).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <string>

namespace kiln::data {
struct Batch;
}

namespace kiln::apps {

// FILE.npy holds uint32 tokens of shape (steps, global batch, seq_len + 1):
// every rank's slice, in rank order, which is the global batch's order.
class BatchDump {
public:
    // Collective; rank 0 creates `path` and writes the header.
    BatchDump(MPI_Comm comm, const std::string& path, std::uint64_t steps, std::uint64_t globalBatch,
              std::uint64_t sampleLength);
    ~BatchDump();
    BatchDump(const BatchDump&) = delete;
    BatchDump& operator=(const BatchDump&) = delete;

    // Collective: this rank's slice of the next step.
    void append(const data::Batch& slice);
    // Collective; checks that every step was written and closes the file.
    void close();

private:
    MPI_Comm comm_;
    std::string path_;
    std::FILE* file_ = nullptr;
    std::uint64_t expected_ = 0, written_ = 0;
};

}  // namespace kiln::apps
