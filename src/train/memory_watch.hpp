// What a rank's memory grew by since the model was built, against the planner's bytes for its stage, and the
// job's summary of every rank's (the 'memory' event of diag.h5). Owns the baseline taken just before the model
// is built. The collective that gathers the rows is the trainer's; the arithmetic and the words are here.
// Private to train/; tested alone (test_memory_watch).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kiln::train {

class MemoryWatch {
public:
    // One rank's row, as the collective carries it (every field a double).
    enum Field { kCounted, kHeld, kResident, kDevice, kReserved, kPlanned, kFields };
    using Row = std::vector<double>;

    // Takes the baseline and starts the peaks afresh (the GPU allocator's too, on `cudaDevice` >= 0): call just
    // before the model is built.
    void markBaseline(int cudaDevice);
    // This rank's peaks since then: on the CPU libtorch's live bytes, the pages its tensors held and the
    // resident set's growth; on a GPU its allocator's peak and reserved bytes. `planned`: the planner's bytes
    // for this rank's stage (0: idle).
    Row sinceBaseline(double planned, int cudaDevice) const;

    // Every rank's rows (kFields each, by rank): summed over the ranks with a stage, and the one furthest from
    // its plan named by its start-up rank (`members`). What is held to the plan: the GPU allocator's peak when
    // `gpu`, else the resident growth. None when no rank has a stage.
    static std::optional<std::string> summary(const std::vector<double>& rows, const std::vector<int>& members, bool gpu);

private:
    std::uint64_t residentAtStart_ = 0;
    std::int64_t allocatedAtStart_ = 0;  // libtorch's counted host bytes then (model/cpu_allocations.hpp)
    std::int64_t heldAtStart_ = 0;       // and the pages its tensors held then
};

}  // namespace kiln::train
