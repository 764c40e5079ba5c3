#include "memory_watch.hpp"

#include "kiln/base/resident_memory.hpp"
#include "kiln/model/cpu_allocations.hpp"
#include "kiln/model/device_memory.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace kiln::train {

void MemoryWatch::markBaseline(int cudaDevice) {
    residentAtStart_ = base::residentBytes();
    allocatedAtStart_ = model::cpuAllocatedBytes();
    heldAtStart_ = model::cpuHeldBytes();
    model::resetCpuPeak();
    model::resetDeviceMemoryPeak(cudaDevice);
}

MemoryWatch::Row MemoryWatch::sinceBaseline(double planned, int cudaDevice) const {
    const std::uint64_t peak = base::peakResidentBytes();
    const auto gpu = model::deviceMemoryPeak(cudaDevice);
    Row row(kFields, 0.0);
    row[kCounted] = double(std::max<std::int64_t>(model::cpuPeakAllocatedBytes() - allocatedAtStart_, 0));
    row[kHeld] = double(std::max<std::int64_t>(model::cpuPeakHeldBytes() - heldAtStart_, 0));
    row[kResident] = peak > residentAtStart_ ? double(peak - residentAtStart_) : 0.0;
    row[kDevice] = double(gpu.allocated);
    row[kReserved] = double(gpu.reserved);
    row[kPlanned] = planned;
    return row;
}

std::optional<std::string> MemoryWatch::summary(const std::vector<double>& rows, const std::vector<int>& members,
                                                bool gpu) {
    const int measure = gpu ? kDevice : kResident;
    const std::size_t ranks = rows.size() / kFields;
    std::size_t worst = ranks;
    double worstError = -1.0, sum[kFields] = {};
    for (std::size_t r = 0; r < ranks; ++r) {
        const double* row = &rows[kFields * r];
        if (row[kPlanned] <= 0.0) continue;  // idle: nothing planned
        for (int k = 0; k < kFields; ++k) sum[k] += row[k];
        if (const double error = std::abs(row[measure] / row[kPlanned] - 1.0); error > worstError) {
            worstError = error;
            worst = r;
        }
    }
    if (worst == ranks) return std::nullopt;
    const double* row = &rows[kFields * worst];
    const std::string measured =
        gpu ? fmt::format("the GPU allocator's peak {:.3f} GB ({:.2f}x), reserved {:.3f} GB; host: resident growth "
                          "{:.3f} GB",
                          sum[kDevice] / 1e9, sum[kDevice] / sum[kPlanned], sum[kReserved] / 1e9, sum[kResident] / 1e9)
            : fmt::format("resident growth {:.3f} GB ({:.2f}x), libtorch's pages {:.3f} GB, its live bytes {:.3f} GB "
                          "({:.2f}x)",
                          sum[kResident] / 1e9, sum[kResident] / sum[kPlanned], sum[kHeld] / 1e9, sum[kCounted] / 1e9,
                          sum[kCounted] / sum[kPlanned]);
    return fmt::format(
        "peak since the model was built, against the planner's stage memory, over the ranks with a stage: {}, planned "
        "{:.3f} GB; furthest off start-up rank {}: {:.3f} GB {}, {:.3f} GB planned ({:.2f}x)",
        measured, sum[kPlanned] / 1e9, members[worst], row[measure] / 1e9, gpu ? "on the GPU" : "resident",
        row[kPlanned] / 1e9, row[measure] / row[kPlanned]);
}

}  // namespace kiln::train
