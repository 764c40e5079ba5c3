// A rank that waits in one of MPI's blocking calls for a late peer leaves its core to the ranks that compute where
// waits sleep (include/kiln/comm/idle_wait.hpp): Open MPI's progress loop yields through sched_yield, which this
// binary exports as kiln's executable does, and kiln's takes a nap there. Before, the waiting rank spun for the whole
// wait (a 6-rank run on 2 cores kept both cores busy for the 10 s a stopped peer took to be found).
#include "kiln/comm/heartbeat.hpp"
#include "kiln/comm/idle_wait.hpp"
#include "kiln/comm/mpi_check.hpp"

#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <ctime>
#include <thread>

#include <sched.h>

namespace {

double threadCpuSeconds() {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

double wallSeconds() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int rankOf() {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return rank;
}

}  // namespace

// Rank 1 comes 1.5 s late to a barrier. Rank 0's thread may spend a small share of that on its CPU: a nap every
// millisecond and a poll of Open MPI's after it (about 1 % of the wait when alone); spinning it would take a core's
// worth whenever one is free. No lower bound on the wait's CPU: a loaded machine only lowers it.
TEST(IdleWait, ABlockingCallNapsWhileAPeerIsLate) {
    if (rankOf() == 1) std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    const double cpu0 = threadCpuSeconds(), wall0 = wallSeconds();
    KILN_MPI(MPI_Barrier(MPI_COMM_WORLD));
    const double cpu = threadCpuSeconds() - cpu0, wall = wallSeconds() - wall0;
    if (rankOf() != 0) return;
    ASSERT_GT(wall, 1.0) << "rank 0 did not wait for its late peer";
    EXPECT_LT(cpu, 0.25 * wall) << "rank 0 used " << cpu << " s of CPU in a wait of " << wall << " s";
}

// Inside a kiln MPI call, a yield after the first 200 us is a nap of a tenth of the wait so far (at most 1 ms).
TEST(IdleWait, AYieldInsideMpiNapsOnceTheWaitIsLong) {
    const kiln::comm::ProgressHere inside;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the wait so far: naps of 1 ms from here on
    const double wall0 = wallSeconds();
    for (int i = 0; i < 50; ++i) sched_yield();
    EXPECT_GE(wallSeconds() - wall0, 0.05) << "50 yields 20 ms into a wait inside MPI took less than 50 naps of 1 ms";
}

int main(int argc, char** argv) {
    ::testing::InitGoogleTest(&argc, argv);
    kiln::comm::setWaitMode(kiln::comm::WaitMode::Sleep);
    kiln::comm::yieldInMpiWhereWaitsSleep();  // before MPI starts, as kiln run does
    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int failed = RUN_ALL_TESTS();
    MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    return failed;
}
