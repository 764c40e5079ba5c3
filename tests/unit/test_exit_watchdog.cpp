// The exit watchdog that ends a process whose MPI_Finalize never returns after
// failures (fault.finalize_timeout_s): it must fire at the deadline it is
// given, fractions of a second included, with the status it was given.
#include "kiln/comm/world.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <thread>

namespace {

[[noreturn]] void armAndHang(int status, double seconds) {
    kiln::comm::armExitWatchdog(status, seconds);
    std::this_thread::sleep_for(std::chrono::seconds(30));  // a finalize that never returns
    std::exit(0);
}

}  // namespace

TEST(ExitWatchdog, EndsTheProcessAtItsDeadlineWithItsStatus) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EXIT(armAndHang(75, 0.5), testing::ExitedWithCode(75),
                "MPI_Finalize did not return within 0.5 s after process failures \\(fault.finalize_timeout_s\\); "
                "exiting with status 75");
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_GE(seconds, 0.5);
    EXPECT_LT(seconds, 10.0);  // the watchdog, not the 30 s hang, ended it
}
