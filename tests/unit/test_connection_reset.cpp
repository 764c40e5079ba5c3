// Connections reset at a stand-down (comm/connection_reset.hpp, issue 64): a process that ends after
// resetConnectionsOnExit() leaves its TCP peers a reset (nothing it queued is delivered later), one that ends
// without it a graceful end of stream; sockets that are not TCP are left as they are.
#include "kiln/comm/connection_reset.hpp"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

using namespace kiln::comm;

namespace {

// A listener on the loopback; its port in `port`.
int listener(in_port_t& port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = 0;
    if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 || ::listen(fd, 1) != 0)
        return -1;
    socklen_t size = sizeof address;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size);
    port = address.sin_port;
    return fd;
}

// What the peer of a child that connected and ended (after resetConnectionsOnExit() when `reset`) reads:
// 0 for an end of stream, -errno for an error.
long peerReadsAfterChildEnds(bool reset) {
    in_port_t port = 0;
    const int listening = listener(port);
    if (listening < 0) return -1000;
    const pid_t child = ::fork();
    if (child == 0) {
        const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in address{};
        address.sin_family = AF_INET;
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        address.sin_port = port;
        if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) ::_exit(2);
        if (reset && resetConnectionsOnExit() < 1) ::_exit(3);
        ::_exit(0);
    }
    const int accepted = ::accept(listening, nullptr, nullptr);
    int status = 0;
    ::waitpid(child, &status, 0);
    char byte = 0;
    const long got = ::recv(accepted, &byte, 1, 0);
    const long result = got < 0 ? -errno : got;
    ::close(accepted);
    ::close(listening);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? result : -2000 - WEXITSTATUS(status);
}

}  // namespace

TEST(ConnectionReset, APeerSeesAResetNotAnEndOfStream) {
    EXPECT_EQ(peerReadsAfterChildEnds(/*reset=*/true), -ECONNRESET);
}

TEST(ConnectionReset, WithoutItAPeerSeesAnEndOfStream) {
    EXPECT_EQ(peerReadsAfterChildEnds(/*reset=*/false), 0);
}

TEST(ConnectionReset, OnlyTcpConnectionsAreTouched) {
    int pair[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
    in_port_t port = 0;
    const int listening = listener(port);
    ASSERT_GE(listening, 0);
    EXPECT_EQ(resetConnectionsOnExit(), 1);  // the listener, not the Unix pair
    linger value{};
    socklen_t size = sizeof value;
    ASSERT_EQ(::getsockopt(listening, SOL_SOCKET, SO_LINGER, &value, &size), 0);
    EXPECT_EQ(value.l_onoff, 1);
    EXPECT_EQ(value.l_linger, 0);
    ::close(listening);
    ::close(pair[0]);
    ::close(pair[1]);
}
