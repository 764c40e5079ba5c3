// Open MPI's runtime ends the whole job when it loses a host's daemon: it kills the processes on the other hosts
// too, and a survivor that notices one of those deaths before its own records it as a failure of a healthy
// host (issue 64's teardown race). The requeued attempt, told by the launcher which host was lost, says which of
// the lost attempt's /failures rows were that teardown's doing.
#pragma once

#include "kiln/io/diag_file.hpp"

#include <cstddef>
#include <string>
#include <vector>

namespace kiln::io {

// The rows (indices into `rows`) of the attempt that started at `since` (seconds since the epoch) that come after
// its first row retiring a node of a lost host, have cause "process", and retire only nodes of other hosts, all
// of them named: those deaths followed the loss on hosts that lived. `lostHosts`: comma-separated (a partition
// takes several; the jobscript names those that do not answer). `nodeHosts`: that attempt's host of each
// start-up node id. Rows before the first lost host's, rows naming an unknown node, and other causes stay.
std::vector<std::size_t> teardownCasualties(const std::vector<FailureRecord>& rows, double since,
                                            const std::vector<std::string>& nodeHosts, const std::string& lostHosts);

// The hosts the lost attempt lost, comma-separated, from the launcher's word `named` (comma-separated; Open MPI's
// runtime names the first daemon it lost contact with, which can be a host that lived: under Slurm one srun step
// carries every daemon, and ssh's tree spawn routes daemons through each other) and this attempt's hosts: the named
// hosts this attempt does not run on; if every one named runs again, the lost attempt's hosts this one lacks; if
// none, `named` as it is (a host back in the job after it was lost).
std::string lostHostsOf(const std::string& named, const std::vector<std::string>& lostAttemptHosts,
                        const std::vector<std::string>& currentHosts);

// The node ids of a row's retired_nodes ("0,2"); empty when the text is not such a list.
std::vector<std::size_t> retiredNodeIds(const std::string& text);

}  // namespace kiln::io
