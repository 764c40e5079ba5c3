// How a thread of kiln's passes the time while it waits for peers (cluster.waits), in kiln's own polled waits
// (deadline.hpp) and inside MPI's blocking calls alike.
//
// Open MPI's blocking calls (the step's all-gather, shrinks, broadcasts) wait in its progress loop, which
// yields the core (sched_yield) when a poll found nothing and the node is oversubscribed, and polls again at
// once. Where ranks share cores that loop took whole cores from the ranks that compute: a 6-rank run on 2 cores
// spent both of them spinning in the step's all-gather for the 10 s a stopped peer took to be found. The
// executable exports its own sched_yield (idle_wait.cpp), which Open MPI's loop binds to: inside a kiln MPI
// call (a ProgressHere scope, progress_here.hpp) it passes the moment as kiln's polled waits do.
#pragma once

#include <string>

namespace kiln::comm {

// Spin: yield and poll again, as Open MPI's own waits do (the least latency where every rank has a core of its
// own). Sleep: a wait past 200 us naps a tenth of what it has waited so far (at most 1 ms, so at most a tenth
// more than the wait itself) and leaves the core to the ranks that compute. Auto: sleep where this host's ranks
// outnumber its cores (setRanksShareCores), spin otherwise.
enum class WaitMode { Auto, Spin, Sleep };
void setWaitMode(WaitMode mode);
WaitMode waitModeNamed(const std::string& name);  // "auto", "spin", "sleep"
void setRanksShareCores(bool shared);
bool ranksOutnumberCores(long ranksOnHost);  // this machine's cores, as Auto counts them
bool sleepInLongWaits();

// Before MPI starts: asks Open MPI to yield in its idle polls (mpi_yield_when_idle, unless the environment sets it)
// wherever this process's waits would sleep: set to Sleep, or Auto with more ranks on this host than cores (the
// launcher's OMPI_COMM_WORLD_LOCAL_SIZE). Open MPI yields by itself only when its launcher was told the node is
// oversubscribed; without its yields a blocking call spins and never reaches kiln's nap.
void yieldInMpiWhereWaitsSleep();

// One idle moment of a wait that has lasted `waitedSeconds`: a nap or a yield, as the mode says.
void passIdleMoment(double waitedSeconds);
// Idle moments the calling thread has passed so far, Open MPI's yields inside MPI included: a polled wait whose
// test already passed one (MPI_Test's progress found nothing and yielded) does not pass a second.
unsigned long idleMomentsOnThisThread();

// The calling thread entered or left MPI (ProgressHere): its yields inside are naps where waits sleep, timed from
// the outermost entry.
void enteredMpi();
void leftMpi();

}  // namespace kiln::comm
