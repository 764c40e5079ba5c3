// Every wait of a step has a deadline (DESIGN.md, invariant 7): the training
// thread's limit (fault.step_timeout_s) plus twice the heartbeat timeout
// (heartbeat.hpp: communicationDeadline()). kiln's transfers and
// the step's collectives are started non-blocking and polled; a wait that
// makes no progress that long ends this rank with the operation and its
// peers in one line, instead of waiting forever behind a live heartbeat
// (ranks that disagree on what to exchange all end this way). A peer that
// hangs is the heartbeat detector's, which the deadline leaves time to act.
#pragma once

#include "kiln/base/error.hpp"
#include "kiln/comm/idle_wait.hpp"  // how its waits pass the time

#include <mpi.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace kiln::comm {

// A wait that made no progress for the limit: what it waited for, in words, and the peers it waited for where a
// transfer knows them (start-up ranks: MPI_COMM_WORLD's, none for processes admitted later).
class CommunicationTimeout : public Error {
public:
    explicit CommunicationTimeout(std::string message, std::vector<int> silentPeers = {})
        : Error(std::move(message), ErrorScope::ThisRank), silentPeers_(std::move(silentPeers)) {}
    const std::vector<int>& silentPeers() const { return silentPeers_; }

private:
    std::vector<int> silentPeers_;
};

// The start-up ranks of ranks `peers` of `comm` (those not started with the job left out).
std::vector<int> startupRanksOf(MPI_Comm comm, const std::vector<int>& peers);

// Polls `test` (true once the wait is over) until it says so; gives signs of
// life meanwhile. Throws CommunicationTimeout naming `what()` past the limit
// (none when the limit is 0).
void pollWithDeadline(const std::function<bool()>& test, const std::function<std::string()>& what);

// Waits for one request that way; returns the MPI code it completed with
// (the request is then MPI_REQUEST_NULL, or left pending after a timeout:
// the process ends).
int waitWithDeadline(MPI_Request& request, MPI_Status* status, const std::function<std::string()>& what);

}  // namespace kiln::comm
