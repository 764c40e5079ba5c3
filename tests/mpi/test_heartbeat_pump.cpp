// The heartbeat pump leaves MPI alone while another thread of the process waits inside it (ProgressHere): Open MPI
// 5.0.10 handles a failure notice on whichever thread makes progress, and its agreement's failure callback is not
// safe beside the training thread's own progress (include/kiln/comm/heartbeat.hpp). The pump's probes are counted
// here by defining MPI_Iprobe in front of Open MPI's (the profiling interface).
#include "kiln/comm/deadline.hpp"
#include "kiln/comm/heartbeat.hpp"
#include "kiln/comm/mpi_check.hpp"

#include <gtest/gtest.h>
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

namespace {

std::atomic<long> pumpProbes{0};
std::thread::id mainThread;

// Waits up to `seconds` for `ready`; a loaded machine may keep the pump unscheduled for a while.
template <class Ready>
bool within(double seconds, Ready ready) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (!ready()) {
        if (std::chrono::steady_clock::now() > until) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return true;
}

}  // namespace

extern "C" int MPI_Iprobe(int source, int tag, MPI_Comm comm, int* flag, MPI_Status* status) {
    if (std::this_thread::get_id() != mainThread) ++pumpProbes;
    return PMPI_Iprobe(source, tag, comm, flag, status);
}

TEST(HeartbeatPump, ProbesWhileNoThreadWaitsInMpi) {
    kiln::comm::HeartbeatPump pump(0.4);  // a probe every 10 ms
    const long before = pumpProbes;
    EXPECT_TRUE(within(30.0, [&] { return pumpProbes > before + 3; })) << "the pump never probed";
}

TEST(HeartbeatPump, LeavesMpiAloneWhileAThreadWaitsInIt) {
    kiln::comm::HeartbeatPump pump(0.4);
    {
        const kiln::comm::ProgressHere here;
        const long inside = pumpProbes;  // a probe under way when the scope began has ended: it is counted
        std::this_thread::sleep_for(std::chrono::milliseconds(300));  // some 30 of the pump's rounds
        EXPECT_EQ(pumpProbes, inside) << "the pump probed while this thread was inside MPI";
    }
    const long after = pumpProbes;
    EXPECT_TRUE(within(30.0, [&] { return pumpProbes > after; })) << "the pump did not probe again afterwards";
}

TEST(HeartbeatPump, APolledWaitKeepsThePumpOut) {
    kiln::comm::HeartbeatPump pump(0.4);
    long during = -1;
    const auto begun = std::chrono::steady_clock::now();
    long first = -1;
    kiln::comm::pollWithDeadline(
        [&] {
            if (first < 0) first = pumpProbes;
            during = pumpProbes - first;
            return std::chrono::steady_clock::now() - begun > std::chrono::milliseconds(300);
        },
        [] { return std::string("a test's wait"); });
    EXPECT_EQ(during, 0) << "the pump probed during a polled wait";
}

TEST(HeartbeatPump, AKilnMpiCallKeepsThePumpOut) {
    // Any call through KILN_MPI (a communicator's creation, a blocking receive): here a receive that waits 300 ms
    // for a message another thread sends.
    kiln::comm::HeartbeatPump pump(0.4);
    std::thread sender([] {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        int value = 7;
        MPI_Send(&value, 1, MPI_INT, 0, 11, MPI_COMM_SELF);
    });
    const long before = pumpProbes;
    int value = 0;
    KILN_MPI(MPI_Recv(&value, 1, MPI_INT, 0, 11, MPI_COMM_SELF, MPI_STATUS_IGNORE));
    const long during = pumpProbes - before;
    sender.join();
    EXPECT_EQ(value, 7);
    EXPECT_LE(during, 1) << "the pump probed while a KILN_MPI call waited";  // one may begin before the call
}

int main(int argc, char** argv) {
    ::testing::InitGoogleTest(&argc, argv);
    mainThread = std::this_thread::get_id();
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    const int failed = RUN_ALL_TESTS();
    MPI_Finalize();
    return failed;
}
