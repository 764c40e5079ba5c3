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

#include "kiln/comm/progress_here.hpp"

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace kiln::comm {

// Before MPI_Init: switch on the detector (a rank silent for `timeoutSeconds`
// is declared failed; a heartbeat every second, or every quarter of it if
// shorter). Sets Open MPI's
// OMPI_MCA_mpi_ft_detector* variables unless the environment already does.
void enableHeartbeatDetector(double timeoutSeconds);

// The training thread's signs of life for the pump below. With a limit > 0,
// once the thread has given no sign for that long (stuck outside MPI: a hung
// file read or device call), the pump ends this process (SIGKILL), so that
// the job finds an ended process at once and recovers, as it would from a
// dead one. kiln's own polling waits give signs, and a blocking MPI call
// made inside a PeerWait does not count, so waiting on a stuck peer never
// ends the waiter: the stuck peer is ended by its own pump, or by a process
// on its host when it is stopped (watchHost), or by the heartbeat detector.
// 0 lifts the limit (during a checkpoint write, say). Both also give a sign.
void setTrainingThreadLimit(double seconds);
void trainingThreadAlive();
// A blocking MPI call that waits for peers (a collective the step cannot poll):
// the time inside it is not the training thread's absence.
class PeerWait {
public:
    PeerWait();
    ~PeerWait();
    PeerWait(const PeerWait&) = delete;
    PeerWait& operator=(const PeerWait&) = delete;

private:
    ProgressHere progress_;
};
// A checkpoint written on another thread of this process (the background
// writer), for as long as it lives: checkpoint writes are exempt from the
// step's deadline, and the training thread may wait on one without a sign of
// life (for the HDF5 library lock the writer holds while a busy file system
// stalls its write, or for the writer itself), so it is not overdue meanwhile.
class BackgroundWrite {
public:
    BackgroundWrite();
    ~BackgroundWrite();
    BackgroundWrite(const BackgroundWrite&) = delete;
    BackgroundWrite& operator=(const BackgroundWrite&) = delete;
};
// This job's other processes on this host (process id, start-up rank). A
// process among them that stays stopped (SIGSTOP, a hung process) for longer
// than the training thread limit in force (the step's deadline) is ended by
// this process's pump with SIGKILL: the job then recovers from it as from a
// dead process, without waiting for the heartbeat timeout.
// `self`: this process's start-up rank; of the processes on the host not
// stopped, the one with the lowest start-up rank acts.
void watchHost(int self, std::vector<std::pair<long, int>> neighbours);
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
    void endStoppedNeighbours();
    MPI_Comm quiet_ = MPI_COMM_NULL;  // a communicator nobody sends on: probing it only progresses
    std::atomic<bool> stop_{false};
    std::mutex wakeMutex_;
    std::condition_variable wake_;  // ends the pump's pause at once when it is stopped
    std::map<long, std::chrono::steady_clock::time_point> stoppedSince_;  // neighbours seen stopped, since when
    std::thread thread_;
};

}  // namespace kiln::comm
