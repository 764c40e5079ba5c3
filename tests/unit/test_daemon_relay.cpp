// kiln launch-relay (issue 64): the daemon's contact for mpirun is pointed at the relay, a clean end closes the
// link, a lost host's link stays open and silent until mpirun closes it, and a launch that failed says so.
#include "kiln/fault/daemon_relay.hpp"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

using namespace kiln::fault;

namespace {

const std::string kUri = "prterun-host1-6757@0.0;tcp://10.231.0.11,172.17.0.1:35025:24,16";

TEST(DaemonRelay, FindsMpirunsContact) {
    const auto contact = runtimeContactOf({"host3", "prted --prtemca prte_hnp_uri \"" + kUri + "\""});
    ASSERT_TRUE(contact.has_value());
    EXPECT_EQ(contact->address, "10.231.0.11");
    EXPECT_EQ(contact->port, 35025);
    EXPECT_FALSE(runtimeContactOf({"host3", "hostname"}).has_value());
}

TEST(DaemonRelay, PointsEveryContactAtTheRelayAndDropsIpv6) {
    const std::vector<std::string> args = {"host3", "prted --prtemca prte_hnp_uri \"" + kUri + ";tcp6://[fe80::1]:35026:64\"" +
                                                        " --prtemca prte_parent_uri \"" + kUri + "\""};
    const auto relayed = throughRelay(args, 4711);
    ASSERT_EQ(relayed.size(), 2u);
    EXPECT_EQ(relayed[0], "host3");
    const std::string want = "prterun-host1-6757@0.0;tcp://10.231.0.11,172.17.0.1:4711:24,16";
    EXPECT_EQ(relayed[1], "prted --prtemca prte_hnp_uri \"" + want + "\" --prtemca prte_parent_uri \"" + want + "\"");
}

TEST(DaemonRelay, UnderSlurmEachDaemonIsAStepOfItsOwn) {
    const auto step = asSlurmStep({"-x", "host3", "PRTE_PREFIX=/p;export PRTE_PREFIX;/p/bin/prted", "--tree-spawn"});
    ASSERT_GE(step.size(), 4u);
    EXPECT_EQ(step.front(), "srun");
    EXPECT_NE(std::find(step.begin(), step.end(), "--nodelist=host3"), step.end());
    EXPECT_NE(std::find(step.begin(), step.end(), "--whole"), step.end());
    EXPECT_NE(std::find(step.begin(), step.end(), "--overlap"), step.end());
    EXPECT_EQ(step[step.size() - 3], "/bin/sh");
    EXPECT_EQ(step.back(), "PRTE_PREFIX=/p;export PRTE_PREFIX;/p/bin/prted --tree-spawn");
}

// A stand-in for mpirun: a listener on the loopback, and the one link the relay makes to it.
struct Mpirun {
    int listener = -1, link = -1, port = 0;
    Mpirun() {
        listener = socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t size = sizeof a;
        bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a);
        listen(listener, 4);
        getsockname(listener, reinterpret_cast<sockaddr*>(&a), &size);
        port = ntohs(a.sin_port);
    }
    ~Mpirun() {
        if (link >= 0) close(link);
        close(listener);
    }
    bool accepted(int ms) {
        pollfd p{listener, POLLIN, 0};
        if (poll(&p, 1, ms) != 1) return false;
        link = accept(listener, nullptr, nullptr);
        return link >= 0;
    }
    // What the daemon sent, up to its end of line; "" when the link closed, "silent" when nothing came in ms.
    std::string read(int ms) {
        std::string got;
        for (;;) {
            pollfd p{link, POLLIN, 0};
            if (poll(&p, 1, ms) != 1) return "silent";
            char c;
            if (::read(link, &c, 1) != 1) return got;
            if (c == '\n') return got;
            got += c;
        }
    }
};

// The relay in a process of its own (it owns signal handlers), with an agent that plays the daemon: it reads the
// relay's port from its command line, connects, says hello, then does what `then` says.
pid_t startRelay(const Mpirun& mpirun, const std::string& then) {
    const std::string daemon =
        "port=$(echo \"$2\" | sed -E 's/.*tcp:\\/\\/[0-9.,]+:([0-9]+):.*/\\1/'); exec 3<>/dev/tcp/127.0.0.1/$port; "
        "echo hello >&3; " + then;
    const pid_t pid = fork();
    if (pid == 0) {
        const std::vector<std::string> agent = {"bash", "-c", daemon, "agent"};
        _exit(runDaemonRelay(agent, {"host3", "prted --prtemca prte_hnp_uri \"x@0.0;tcp://127.0.0.1:" +
                                                  std::to_string(mpirun.port) + ":8\""}));
    }
    return pid;
}

int exitStatus(pid_t pid) {
    int raw = 0;
    waitpid(pid, &raw, 0);
    return WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
}

TEST(DaemonRelay, ADaemonThatEndsCleanlyClosesItsLink) {
    Mpirun mpirun;
    const pid_t relay = startRelay(mpirun, "read -r bye <&3; exit 0");
    ASSERT_TRUE(mpirun.accepted(30000));
    EXPECT_EQ(mpirun.read(30000), "hello");
    ASSERT_EQ(write(mpirun.link, "bye\n", 4), 4);
    EXPECT_EQ(mpirun.read(30000), "");  // closed
    EXPECT_EQ(exitStatus(relay), 0);
}

TEST(DaemonRelay, ALostHostsLinkStaysOpenAndSilentUntilMpirunCloses) {
    Mpirun mpirun;
    const pid_t relay = startRelay(mpirun, "exit 137");  // the host's processes killed: the session ends 137
    ASSERT_TRUE(mpirun.accepted(30000));
    EXPECT_EQ(mpirun.read(30000), "hello");
    EXPECT_EQ(mpirun.read(2000), "silent");  // no end of the link reaches mpirun
    ASSERT_EQ(write(mpirun.link, "exit\n", 5), 5);  // mpirun's words to a daemon that is gone are dropped
    EXPECT_EQ(waitpid(relay, nullptr, WNOHANG), 0);  // the relay still holds the link
    close(mpirun.link);
    mpirun.link = -1;
    EXPECT_EQ(exitStatus(relay), 0);
}

TEST(DaemonRelay, ALaunchThatFailedReportsItsStatus) {
    Mpirun mpirun;
    const pid_t pid = fork();
    if (pid == 0) _exit(runDaemonRelay({"bash", "-c", "exit 3", "agent"},
                                       {"host3", "prted --prtemca prte_hnp_uri \"x@0.0;tcp://127.0.0.1:" +
                                                     std::to_string(mpirun.port) + ":8\""}));
    EXPECT_EQ(exitStatus(pid), 3);
    EXPECT_FALSE(mpirun.accepted(0));
}

}  // namespace
