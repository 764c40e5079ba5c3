// The fault injector is asked from two threads: the training thread and the
// checkpoint writer's (phases write and publish). Built with
// ThreadSanitizer (tests/CMakeLists.txt): an unguarded record of which
// injections fired is a data race it reports (exit status 66), and an
// injection must fire exactly once however the threads interleave.
#include "kiln/fault/fault_injector.hpp"

#include <atomic>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

int main() {
    constexpr int kSteps = 200;
    std::vector<kiln::fault::Injection> items;
    std::string text;
    for (int s = 0; s < kSteps; ++s) {
        if (s > 0) text += ',';
        text += "0:" + std::to_string(s) + ":write:throw";
    }
    if (const auto problem = kiln::fault::parseInjections(text, items); !problem.empty()) {
        std::fprintf(stderr, "FAIL: %s\n", problem.c_str());
        return 1;
    }
    kiln::fault::FaultInjector injector(items, 0);
    std::atomic<int> thrown{0};
    const auto ask = [&] {
        for (int s = 0; s < kSteps; ++s) try {
                injector.at(static_cast<std::uint64_t>(s), kiln::fault::Phase::Write);
            } catch (const std::runtime_error&) {
                ++thrown;
            }
    };
    std::thread writer(ask);
    ask();
    writer.join();
    if (thrown != kSteps) {
        std::fprintf(stderr, "FAIL: %d injections fired for %d items (each must fire once)\n", thrown.load(), kSteps);
        return 1;
    }
    std::printf("PASS: %d injections asked for from two threads fired once each\n", kSteps);
    return 0;
}
