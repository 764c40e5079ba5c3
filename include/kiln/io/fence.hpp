// Fencing writers by epoch. Recovery kills a failed rank's process when a
// survivor shares its host; a hung node with no survivor on its host cannot be
// killed from inside the job, and may wake up later in the middle of a write.
// The job's epoch (one more per start and per recovery) is published in a
// file of the run's directory; before a process commits a file that others
// read (a checkpoint, `latest`), it checks that its own epoch is not older:
// a process the job has moved on from ends itself instead of writing.
#pragma once

#include <cstdint>
#include <filesystem>

namespace kiln::io {

class Fence {
public:
    // The file that holds the job's epoch, and this process's epoch.
    void arm(std::filesystem::path file, std::uint64_t epoch);
    // The epoch the file holds now (0 when there is none).
    std::uint64_t published() const;
    std::uint64_t epoch() const { return epoch_; }
    // The run's directory, where the epoch and the quorum witnesses are (empty while unarmed).
    std::filesystem::path directory() const { return file_.parent_path(); }
    // A recovery round finished (every survivor alike).
    void advance() { ++epoch_; }
    // Writes this process's epoch into the file (one process of the job).
    void publish() const;
    // Ends this process (SIGKILL, as a failed node ends) before `what` is
    // committed if the job's published epoch is newer than its own.
    void check(const char* what) const;

private:
    std::filesystem::path file_;
    std::uint64_t epoch_ = 0;
};

// The epoch published in `file` (0 when there is none).
std::uint64_t publishedEpoch(const std::filesystem::path& file);

// The process's fence (unarmed: every check passes).
Fence& fence();

}  // namespace kiln::io
