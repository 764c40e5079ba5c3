// kiln launch-relay: the ssh agent kiln-mpirun gives Open MPI's launcher, so that a host lost whole is a failure
// ULFM recovers from inside the job, not the end of the job (fault/daemon_relay.hpp). Not a command users run.
#include "kiln/fault/daemon_relay.hpp"
#include "subcommands.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace kiln::apps {

int launchRelayMain(int argc, char** argv) {
    if (argc < 2 || !std::strcmp(argv[1], "--help")) {
        std::fprintf(argc < 2 ? stderr : stdout,
                     "usage: kiln launch-relay [agent options] HOST COMMAND...\n\n"
                     "Open MPI's ssh agent under kiln-mpirun (plm_ssh_agent): runs the site's agent, KILN_SSH_AGENT\n"
                     "(default ssh; words split at spaces), with the daemon's link to mpirun through a relay, and\n"
                     "keeps that link open and silent when the host is lost, so that the runtime does not end the job.\n");
        return argc < 2 ? 2 : 0;
    }
    const char* agentLine = std::getenv("KILN_SSH_AGENT");
    std::istringstream words(agentLine != nullptr && *agentLine != '\0' ? agentLine : "ssh");
    std::vector<std::string> agent;
    for (std::string w; words >> w;) agent.push_back(w);
    return fault::runDaemonRelay(agent, std::vector<std::string>(argv + 1, argv + argc));
}

}  // namespace kiln::apps
