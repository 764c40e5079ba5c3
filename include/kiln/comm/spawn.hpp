// Processes that join a running job without stopping it. One rank of the job
// (the spawner) starts them with MPI_Comm_spawn over MPI_COMM_SELF in a
// helper thread, while it trains; they start, load their libraries, read the
// deck and the data sources and plan, and say when they are ready. At the
// next step boundary the whole job takes them in: MPI_Comm_accept over the
// job's control communicator against their MPI_Comm_connect, then a merge
// into one intracommunicator, the job's ranks first, the new ones after.
// The job waits only for that connect, not for their start-up.
//
// Why not MPI_Intercomm_create through the spawner: with the Open MPI kiln
// ships, processes of two jobs that never connected (the job's other ranks
// and the new ones) cannot exchange messages, only the pair that spawned.
// MPI_Comm_spawn works under ULFM with that Open MPI, also after failures
// (tests/fault/spawn_after_failure.c).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kiln::comm {

// Whether this process was started by a running job (it has a parent).
bool spawnedIntoJob();

// How long the new processes may take to start and get ready, and how long
// the connect at the boundary may take before a process ends as a failed
// node: 4 x fault.hang_timeout_s, at least 60 s (MPI_Comm_spawn and the
// connect cannot notice a process that fails while they run).
double spawnDeadlineSeconds();

// On the spawner: new processes starting while this rank trains.
class JoinersStarting {
public:
    // Starts `processes` copies of this process's own command line (its
    // executable, arguments and working directory) on `hosts` (a
    // comma-separated list; empty: wherever the runtime has slots), and sends
    // them `preparation` once they run. Returns at once.
    JoinersStarting(int processes, const std::string& hosts, std::vector<std::int64_t> preparation);
    // Gives them up unless the job took them in: they end.
    ~JoinersStarting();
    JoinersStarting(const JoinersStarting&) = delete;
    JoinersStarting& operator=(const JoinersStarting&) = delete;

    enum class Phase { Starting, Ready, Failed };
    // Past spawnDeadlineSeconds() still Starting, they are given up: Failed.
    Phase phase();
    // Why they failed (one of them died or gave an error, the runtime refused
    // to start them, the deadline passed).
    std::string problem() const;
    int processes() const { return processes_; }
    // From the start to Ready.
    double readySeconds() const;

    struct Shared;  // what the helper thread and this object share

private:
    friend MPI_Comm acceptJoiners(MPI_Comm, int, JoinersStarting*);
    // At the boundary, on the spawner: tells them to connect. Throws MpiError
    // when one of them can no longer be told.
    void go();
    const std::string& port() const;
    void accepted();

    int processes_ = 0;
    std::shared_ptr<Shared> shared_;
};

// Collective over `control`, at a step boundary: the ready processes that
// the rank `root` of control started (`starting`: that rank's
// JoinersStarting, nullptr on the others) connect, and the merged
// communicator is returned, the job's ranks first. Throws ProcFailedError
// when a rank of control failed, MpiError when the new processes could not
// be told to connect (every rank of control throws it alike).
MPI_Comm acceptJoiners(MPI_Comm control, int root, JoinersStarting* starting);

// On a process started by JoinersStarting: its link to the spawner.
class JoinerLink {
public:
    // Right after MPI_Init: connects to the spawner and receives the
    // preparation. Throws Error when this process was not started by a job.
    JoinerLink();
    ~JoinerLink();
    JoinerLink(const JoinerLink&) = delete;
    JoinerLink& operator=(const JoinerLink&) = delete;

    const std::vector<std::int64_t>& preparation() const { return preparation_; }
    // Collective with the other new processes and the spawner: all ready.
    void ready();
    // Waits until the job takes the new processes in at a step boundary, then
    // returns the communicator merged with the job (the job's ranks first).
    // Throws ProcFailedError when the spawner failed or gave them up.
    MPI_Comm join();

private:
    MPI_Comm bridge_ = MPI_COMM_NULL;  // the spawner (rank 0) and the new processes
    std::vector<std::int64_t> preparation_;
    std::string port_;
};

// On a spawned process, before MPI_Init (its spawner sets the deadline in its
// environment; elsewhere nothing): past spawnDeadlineSeconds() without
// JoinerLink::ready() returning, the process ends as a failed node.
void armJoinDeadline();

}  // namespace kiln::comm
