#include "trainer_state.hpp"

#include "kiln/base/error.hpp"
#include "kiln/base/log.hpp"
#include "kiln/base/stop_request.hpp"
#include "kiln/comm/error_agreement.hpp"
#include "kiln/comm/heartbeat.hpp"
#include "kiln/comm/mpi_check.hpp"
#include "kiln/comm/ulfm.hpp"
#include "kiln/fault/admit_request.hpp"

#include <cmath>

namespace kiln::train {

Trainer::State::Attempt Trainer::State::attempt(std::uint64_t step, double targetsPerStep, double& wait) {
    Attempt a;
    comm::trainingThreadAlive();
    const auto begun = Clock::now();
    try {
        // Only the ranks that read a corrupt chunk see it: they tell the others.
        const data::Batch* batch = nullptr;
        std::string problem;
        try {
            batch = &loader->current();
            wait += loader->lastWaitSeconds();
        } catch (const InputError& e) {
            problem = e.what();
        }
        a.dataError = comm::firstError(world.control(), problem);
        if (!a.dataError.empty()) return a;
        const StepWork work = parallel->runStep(*batch, targetsPerStep, *injector, step);
        a.work = work.stage;
        const auto s0 = Clock::now();
        // One collective over every rank for the step's scalars: the loss,
        // the squared gradient norm, and the stop signal (so that every
        // rank learns of it in the same step).
        const bool stop = stopSignal() != 0 || (world.rank() == 0 && stopFileExists());
        if (world.rank() == 0 && admitPending == 0) {
            const auto request = fault::takeAdmitRequest(runDir / "admit");
            if (!request.problem.empty()) log::warn("admission request ignored: {}", request.problem);
            admitPending = request.nodes;
            admitHosts = request.hosts;
        }
        // Gathered rather than summed: every rank also learns every rank's
        // compute time (the speed monitor's input), and sums in rank order.
        constexpr int kFields = 6;
        const double mine[kFields] = {work.stage.lossSum, work.squaredNorm, stop ? 1.0 : 0.0,
                                      world.rank() == 0 ? double(admitPending) : 0.0,
                                      checkpointing->writeEnded() ? 0.0 : 1.0,
                                      work.stage.forward + work.stage.backward};
        std::vector<double> all(static_cast<std::size_t>(kFields * world.size()));
        KILN_MPI(MPI_Allgather(mine, kFields, MPI_DOUBLE, all.data(), kFields, MPI_DOUBLE, world.control()));
        double sums[kFields] = {};
        a.compute.resize(static_cast<std::size_t>(world.size()));
        for (std::size_t r = 0; r < a.compute.size(); ++r) {
            for (int k = 0; k < kFields; ++k) sums[k] += all[r * kFields + static_cast<std::size_t>(k)];
            a.compute[r] = all[r * kFields + kFields - 1];
        }
        a.lossSum = sums[0];
        a.gradNorm = std::sqrt(sums[1]);
        a.stopRequested = sums[2] > 0;
        a.admitNodes = static_cast<int>(sums[3]);
        a.checkpointWriting = static_cast<int>(sums[4]);
        a.sync = work.sumsSeconds + since(s0);
    } catch (const ProcFailedError& e) {
        log::detail("step {}: {}", step, e.what());
        a.ok = false;
        comm::revoke(world.control());
        parallel->interrupt();
    }
    injector->at(step, fault::Phase::Commit);
    // The commit: all survivors apply this step, or none does.
    if (world.faultTolerant()) a.ok = comm::agree(world.control(), a.ok ? 1 : 0) == 1;
    a.seconds = since(begun);
    return a;
}

}  // namespace kiln::train
