// Fencing through pidfds (comm/host_fence.hpp, issue 65): a held process is
// killed; one that exited is not signalled again, whatever now has its id;
// a rank without a handle (another host) is never signalled.
#include "kiln/comm/host_fence.hpp"

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

using namespace kiln::comm;

namespace {

pid_t sleeper() {
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::pause();
        ::_exit(0);
    }
    return pid;
}

}  // namespace

TEST(HostFence, AHeldProcessIsKilled) {
    const pid_t child = sleeper();
    ASSERT_GT(child, 0);
    holdHostMates({{child, 101}});
    ASSERT_TRUE(killHostMate(101));
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}

TEST(HostFence, AProcessThatExitedIsNotSignalledAgain) {
    const pid_t child = sleeper();
    ASSERT_GT(child, 0);
    holdHostMates({{child, 102}});
    ::kill(child, SIGTERM);
    ASSERT_EQ(::waitpid(child, nullptr, 0), child);  // reaped: its id is free for any process now
    EXPECT_FALSE(killHostMate(102));
}

TEST(HostFence, ARankWithoutAHandleIsNeverSignalled) {
    EXPECT_FALSE(killHostMate(999));
}
