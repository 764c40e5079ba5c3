// What the run's start used, reported once its first step is committed: each start-up phase's seconds on the
// slowest rank, and at the end every rank's memory against the planner's bytes for its stage.
#include "trainer_state.hpp"

#include "kiln/comm/heartbeat.hpp"
#include "kiln/base/error.hpp"
#include "kiln/base/log.hpp"
#include "kiln/base/startup_clock.hpp"
#include "kiln/comm/mpi_check.hpp"
#include "kiln/comm/ulfm.hpp"
#include "kiln/model/device_memory.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace kiln::train {

void Trainer::State::reportStartup(std::uint64_t step) {
    const auto phases = base::startupPhases();
    std::vector<double> seconds;
    for (const auto& [name, s] : phases) seconds.push_back(s);
    try {
        KILN_MPI(MPI_Allreduce(MPI_IN_PLACE, seconds.data(), static_cast<int>(seconds.size()), MPI_DOUBLE, MPI_MAX,
                               world.control()));
    } catch (const ProcFailedError& e) {
        log::detail("a rank failed during the start-up report: {}", e.what());
        abandonStep();  // every survivor meets it in the next step and recovers
        return;
    }
    if (!report.holds()) return;
    std::vector<std::string> parts;
    double total = 0.0;
    for (std::size_t k = 0; k < phases.size(); ++k) {
        parts.push_back(fmt::format("{} {:.2f}", phases[k].first, seconds[k]));
        total += seconds[k];
    }
    const std::string detail = fmt::format("{} ranks, seconds on the slowest rank per phase: {}; {:.2f} s in all (the "
                                           "phases' maxima added)",
                                           world.size(), fmt::join(parts, ", "), total);
    log::info("  start-up   {}", detail);
    report.event(step, "startup", detail);
}

void Trainer::State::reportMemory(std::uint64_t step) {
    // Planned: the stage's weights, gradients, moments, activations in
    // flight, one layer's temporaries and the runtime the profile measured.
    double planned = 0.0;
    const auto& layout = parallel->layout();
    const auto& role = parallel->role();
    if (!role.idle()) {
        const auto& p = layout.pipelines[static_cast<std::size_t>(role.pipeline)];
        if (const auto* t = p.share().templateIn(plan.templates); t && role.stage < t->stages.size())
            planned = t->stages[role.stage].memoryWith(std::min<std::uint64_t>(role.stages - role.stage, p.microbatches));
    }
    const int cudaDevice = device.is_cuda() ? device.index() : -1;
    const MemoryWatch::Row mine = memory.sinceBaseline(planned, cudaDevice);
    std::vector<double> all(MemoryWatch::kFields * static_cast<std::size_t>(world.size()));
    {
        const comm::PeerWait peers;  // waiting for the slowest rank is not this rank's hang
        KILN_MPI(MPI_Allgather(mine.data(), MemoryWatch::kFields, MPI_DOUBLE, all.data(), MemoryWatch::kFields,
                               MPI_DOUBLE, world.control()));
    }
    if (!report.holds()) return;
    const bool gpu = model::deviceMemoryPeak(cudaDevice).known;
    if (const auto detail = MemoryWatch::summary(all, world.members(), gpu)) {
        log::info("  memory     {}", *detail);
        report.event(step, "memory", *detail);
    }
}

}  // namespace kiln::train
