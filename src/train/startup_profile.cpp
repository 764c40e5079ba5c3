#include "kiln/train/startup_profile.hpp"

#include "kiln/comm/mpi_check.hpp"
#include "kiln/model/profiler.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace kiln::train {

plan::ModelProfile measureStartupProfile(const arch::ModelConfig& config, std::uint64_t microBatch,
                                         torch::Device device, bool bf16, MPI_Comm comm) {
    // Three timed runs after a warm-up; the process's thread settings as they are.
    plan::ModelProfile profile = model::profileModel(config, microBatch, 3, -1, device, bf16, /*eachKindOnce=*/true);
    // Every field that a measurement sets is agreed, not only the times the
    // plan's stages are cut by: the update time and the bytes kept for
    // backward feed the stage times and the memory check too, and ranks that
    // planned from their own would build different layouts (and wait for
    // each other in different sums forever).
    constexpr std::size_t kMeasured = 4;  // forward, backward, optimizer seconds, activation bytes
    std::vector<double> mine;
    for (const auto& layer : profile.layers) {
        mine.push_back(layer.forwardSeconds);
        mine.push_back(layer.backwardSeconds);
        mine.push_back(layer.optimizerSeconds);
        mine.push_back(double(layer.activationBytes));
    }
    int ranks = 0;
    KILN_MPI(MPI_Comm_size(comm, &ranks));
    std::vector<double> all(mine.size() * static_cast<std::size_t>(ranks));
    KILN_MPI(MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_DOUBLE, all.data(),
                           static_cast<int>(mine.size()), MPI_DOUBLE, comm));
    // The median of each field over the ranks: the same on every rank, since
    // every rank sorts the same numbers.
    for (std::size_t k = 0; k < mine.size(); ++k) {
        std::vector<double> column;
        for (int r = 0; r < ranks; ++r) column.push_back(all[static_cast<std::size_t>(r) * mine.size() + k]);
        std::nth_element(column.begin(), column.begin() + static_cast<std::ptrdiff_t>(column.size() / 2), column.end());
        const double median = column[column.size() / 2];
        auto& layer = profile.layers[k / kMeasured];
        switch (k % kMeasured) {
            case 0: layer.forwardSeconds = median; break;
            case 1: layer.backwardSeconds = median; break;
            case 2: layer.optimizerSeconds = median; break;
            default: layer.activationBytes = static_cast<std::uint64_t>(median); break;
        }
    }
    // The plan is the same on every rank: the largest runtime any rank measured.
    double runtime = double(profile.runtimeBytes);
    KILN_MPI(MPI_Allreduce(MPI_IN_PLACE, &runtime, 1, MPI_DOUBLE, MPI_MAX, comm));
    profile.runtimeBytes = static_cast<std::uint64_t>(runtime);
    profile.device = fmt::format("measured at start-up: {} {}, median of {} rank{}", device.is_cuda() ? "cuda" : "cpu",
                                 bf16 ? "bf16" : "fp32", ranks, ranks == 1 ? "" : "s");
    return profile;
}

std::filesystem::path startupProfilePath(const std::filesystem::path& runDir) { return runDir / "startup-profile.h5"; }

}  // namespace kiln::train
