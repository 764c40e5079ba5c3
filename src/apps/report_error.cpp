#include "report_error.hpp"

#include "kiln/base/error.hpp"
#include "kiln/base/log.hpp"
#include "kiln/comm/deadline.hpp"
#include "kiln/comm/world.hpp"
#include "kiln/io/launch_record.hpp"

#include <mpi.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

namespace kiln::apps {

int reportError(const std::exception& e) {
    const auto* error = dynamic_cast<const Error*>(&e);
    const bool allRanks = error && error->scope() == ErrorScope::AllRanks;
    int initialized = 0, finalized = 0, size = 1;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    const bool mpiUp = initialized && !finalized;
    if (mpiUp) MPI_Comm_size(MPI_COMM_WORLD, &size);

    if (allRanks) {
        // The process that speaks for the job (rank 0, or the survivor that took over when rank 0 was lost).
        if (log::speaksForJob()) std::fprintf(stderr, "kiln: error: %s\n", e.what());
        // Not a requeue: every rank met it, and would meet it again.
        io::stopAliveBeacon();
        io::writeEndRecord(1, std::string("error: ") + e.what());
        if (mpiUp) MPI_Finalize();
        // Before MPI is up (a bad option) no rank can wait for another: one
        // that ended first made the launcher end the job, rank 0 at times before
        // it printed, and the error was lost (1 run in 10 on 2 ranks). The
        // others give rank 0 the time to print and end the job itself.
        if (!mpiUp && log::rank() != 0) std::this_thread::sleep_for(std::chrono::seconds(5));
        return 1;
    }
    std::fprintf(stderr, "kiln: error on rank %d (%s): %s\n", log::rank(), log::host().c_str(), e.what());
    // A wait past every deadline with no failure reported: the peers are silent (a host without power or cut
    // off, which Open MPI 5.0's detector may never declare failed), not this rank. Ending it alone would make it
    // the failure; the job ends for a requeue instead (issue 64).
    if (const auto* timeout = dynamic_cast<const comm::CommunicationTimeout*>(&e);
        timeout != nullptr && mpiUp && size > 1 && localErrorsAreFailures())
        io::endJobForRequeue(std::string("requeue: rank ") + std::to_string(log::rank()) + " on " + log::host() +
                                 ": " + e.what(),
                             comm::nodeNamesOfStartupRanks(timeout->silentPeers()));
    if (mpiUp && size > 1 && localErrorsAreFailures()) {
        // The survivors recover as from a failed node; an abort would end them too. It ends as a
        // failed node does: Open MPI's runtime takes an exit status other than 0 for the job's
        // failure (and slows the survivors down while it winds the job up), a killed process for a fault.
        std::fprintf(stderr, "kiln: rank %d ends alone; the job goes on without its node\n", log::rank());
        std::fflush(stdout);
        std::fflush(stderr);
        std::raise(SIGKILL);
    }
    std::fflush(stderr);
    if (mpiUp && size > 1) MPI_Abort(MPI_COMM_WORLD, 1);
    return 1;
}

}  // namespace kiln::apps
