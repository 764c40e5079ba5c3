// Hang detection: Open MPI's heartbeat failure detector, driven by kiln.
//
// Open MPI 5.0's detector can run in a thread of its own, but that thread
// sends its first heartbeat from inside MPI_Init, before every peer has
// registered the handler for it: a peer that is still in the start-up fence
// then calls a null handler (a segmentation fault in mca_btl_sm, seen in
// about 1 start in 10 on a loaded host). Without its thread the detector
// starts only after MPI_Init's last barrier, but then heartbeats are sent and
// checked only while the process makes MPI progress, and a rank computing a
// long step would be declared dead. So kiln runs the detector without its
// thread and drives MPI progress itself from a small thread of its own (MPI
// initialised with MPI_THREAD_MULTIPLE for it), a few times per period.
#pragma once

#include <mpi.h>

#include <atomic>
#include <thread>

namespace kiln::comm {

// Before MPI_Init: switch on the detector (a rank silent for `timeoutSeconds`
// is declared failed; heartbeats every quarter of it). Sets Open MPI's
// OMPI_MCA_mpi_ft_detector* variables unless the environment already does.
void enableHeartbeatDetector(double timeoutSeconds);

// The training thread's signs of life for the pump below. With a limit > 0,
// once the thread has given no sign for that long (stuck outside MPI: a hung
// file read or device call), the pump stops, so that heartbeats stop and the
// job declares this process failed, as it would a dead one. A thread blocked
// inside MPI sends heartbeats itself, and kiln's own polling waits (NCCL)
// give signs, so waiting on a stuck peer does not count. 0 lifts the limit
// (during a checkpoint write, say). Both also give a sign.
void setTrainingThreadLimit(double seconds);
void trainingThreadAlive();
// The limit in force (0: none).
double trainingThreadLimit();
// How long a wait for peers may make no progress before it is an error
// (deadline.hpp): the limit above, plus twice the heartbeat timeout, so
// that a peer stuck outside MPI (silent after the limit) or stopped is
// declared failed by the detector first, and only a wait nothing will end
// (ranks that disagree) becomes an error. 0 when there is no limit.
double communicationDeadline();
// fault.hang_timeout_s as enableHeartbeatDetector() was given it (0: off).
double heartbeatTimeout();

// After MPI_Init with MPI_THREAD_MULTIPLE: keeps MPI progressing, so that
// heartbeats go out and are checked while the training thread computes.
class HeartbeatPump {
public:
    explicit HeartbeatPump(double timeoutSeconds);
    ~HeartbeatPump();  // stops and joins the thread; call before MPI_Finalize
    HeartbeatPump(const HeartbeatPump&) = delete;
    HeartbeatPump& operator=(const HeartbeatPump&) = delete;

private:
    void run(double intervalSeconds);
    MPI_Comm quiet_ = MPI_COMM_NULL;  // a communicator nobody sends on: probing it only progresses
    std::atomic<bool> stop_{false};
    std::thread thread_;
};

}  // namespace kiln::comm
