// The checkpoint's fault hooks hold the injector (issue 52): a background checkpoint's writer thread may still
// run its hook while the trainer is torn down (an exception during the write at shutdown), after the trainer's
// own reference to the injector is gone. The hook must find the injector alive and working, and let it go
// only when the hooks themselves go. Built with AddressSanitizer, so that a hook reaching a destroyed injector
// is reported even where it would not crash.
#include "../../src/train/checkpoint_fault_hooks.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <thread>

using namespace kiln;

TEST(CheckpointFaultHooks, HoldTheInjectorPastItsOwner) {
    std::vector<fault::Injection> items;
    ASSERT_EQ(fault::parseInjections("0:4:write:throw", items), "");
    auto injector = std::make_shared<fault::FaultInjector>(items, 0);
    const std::weak_ptr<fault::FaultInjector> watch = injector;
    auto hooks = train::checkpointFaultHooks(injector, 5);  // a checkpoint of step 5 follows step 4

    injector.reset();  // the trainer's members destroyed first
    ASSERT_FALSE(watch.expired()) << "the hooks do not hold the injector";
    std::string thrown;
    std::thread writer([&] {
        try {
            hooks.duringWrite();
        } catch (const std::exception& e) {
            thrown = e.what();
        }
    });
    writer.join();
    EXPECT_NE(thrown.find("fault injection"), std::string::npos) << "the write hook did not reach the injector: '"
                                                                  << thrown << "'";
    hooks = {};
    EXPECT_TRUE(watch.expired()) << "the injector outlives the hooks that held it";
}

TEST(CheckpointFaultHooks, FireAtTheStepTheCheckpointFollows) {
    std::vector<fault::Injection> items;
    ASSERT_EQ(fault::parseInjections("0:7:write:throw", items), "");
    const auto injector = std::make_shared<fault::FaultInjector>(items, 0);
    EXPECT_NO_THROW(train::checkpointFaultHooks(injector, 7).duringWrite());  // follows step 6
    EXPECT_THROW(train::checkpointFaultHooks(injector, 8).duringWrite(), std::runtime_error);
}
