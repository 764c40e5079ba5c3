// The failures a simulated run meets: drawn from a failure model (nodes
// failing independently at a mean time between failures, a share of the
// failures taking a whole group of nodes at once: a switch, a rack) or read
// from a trace of times and node ids. The same seed gives the same schedule,
// so every choice of a sweep meets the same failures.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::sim {

struct FailureModel {
    std::uint32_t nodes = 0;
    double seconds = 0.0;        // the run's wall time
    double nodeMtbfHours = 0.0;  // mean hours between failures of one node (failure events it starts)
    double groupShare = 0.0;     // the share of failure events that take a group of nodes at once
    std::uint32_t groupNodes = 1;  // nodes in such a group (aligned: nodes [k*g, (k+1)*g))
    double hangShare = 0.0;        // the share of failures that leave processes hung, not ended
    double hostShare = 0.0;        // the share that take the host whole (its launcher daemon too)
};

struct FailureEvent {
    double time = 0.0;  // seconds since the run started
    std::vector<std::uint32_t> nodes;
    bool hang = false;  // found by heartbeats (fault.hang_timeout_s), not by the process ending
    // The host is lost whole, its launcher daemon with it: kiln's launch relay keeps the loss from Open MPI
    // 5.0's runtime and the job recovers in place. With `hang`: a host gone silent (power, a cut link), recovered
    // in place once the heartbeat detector has declared all its ranks failed (SimCosts::silentHost), or requeued
    // when the step's deadline comes first; without: killed, found at once.
    bool host = false;
};

// Failure events of `model` over its wall time, in time order (a Poisson
// process of rate nodes / MTBF).
std::vector<FailureEvent> drawFailures(const FailureModel& model, std::uint64_t seed);

// A trace: one failure per line, "SECONDS NODE[,NODE...] [hang] [host]"; blank
// lines and # comments are skipped. Errors name the file and line; a node id
// must be below `nodes`. Sorted by time on return.
std::vector<FailureEvent> readFailureTrace(const std::string& path, std::uint32_t nodes);

// The failures a run met, from its diag.h5: each recovery's time (seconds
// after the run's first layout was instantiated) and the nodes it retired.
std::vector<FailureEvent> traceFromDiag(const std::string& path, std::uint32_t nodes);

}  // namespace kiln::sim
