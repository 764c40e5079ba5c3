// The link between mpirun and each host's daemon, relayed so that a host lost
// whole does not end the job (issue 64). Open MPI 5.0's runtime (PRRTE 3.0)
// ends every job when it loses a daemon, before ULFM in the ranks can recover:
// measured on emulated hosts, no runtime setting avoids it. kiln's launcher
// therefore starts the daemons through `kiln launch-relay` (Open MPI's
// plm_ssh_agent): it runs the site's agent (ssh) with the daemon's contact for
// mpirun pointed at a relay of its own, and forwards both ways. When the
// daemon's side ends without its session ending cleanly (the host died, its
// link was cut, its agent failed), the relay keeps mpirun's side open and
// silent: the runtime never learns of the loss, and the ranks' ULFM finds the
// host's ranks failed, as it finds a node's processes today.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace kiln::fault {

// mpirun's contact in a daemon's command line: PRRTE's URI, "NAME;tcp://A[,B...]:PORT:MASKS".
struct RuntimeContact {
    std::string address;  // the first address listed: mpirun's host, where the relay runs
    int port = 0;
};

// The first tcp:// contact in the arguments; none when the command starts no daemon (a plain remote command).
std::optional<RuntimeContact> runtimeContactOf(const std::vector<std::string>& args);

// The arguments with every tcp:// contact's port replaced by relayPort (its addresses kept: the relay listens on
// all of them) and every tcp6:// contact removed, so that the daemon can reach mpirun only through the relay.
std::vector<std::string> throughRelay(const std::vector<std::string>& args, int relayPort);

// Open MPI's ssh command line (ssh options, HOST, the remote shell's command) as a Slurm step of its own on HOST,
// with all of the job's CPUs there (--whole; the daemon's ranks run in its step): under Slurm, each daemon in a
// step of its own, so that a lost host ends only its own step (Open MPI's own Slurm launch puts every daemon in
// one step, which a lost host ends whole).
std::vector<std::string> asSlurmStep(const std::vector<std::string>& args);

// Runs `agent args...` (the site's ssh: agent is its argv; "srun" alone: asSlurmStep) with the daemon relayed,
// until its session ends and mpirun has closed the link, or mpirun ends. Returns the exit status for Open MPI's launcher: the session's own
// while the daemon never connected (a launch that failed is reported as such), else 0. What it decides is said on
// stderr, which mpirun prints, prefixed "kiln launch-relay: ".
int runDaemonRelay(const std::vector<std::string>& agent, const std::vector<std::string>& args);

}  // namespace kiln::fault
