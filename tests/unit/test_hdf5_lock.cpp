// Debian's HDF5 is not thread-safe, so every HDF5 call, a handle's close included, waits for the library lock
// that the loader's prefetch thread and checkpoint writers hold (a resumed run crashed when a diag.h5 handle
// closed outside it while the loader read shards).
#include "kiln/io/hdf5.hpp"
#include "kiln/io/hdf5_array.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <thread>

namespace {

namespace h5 = kiln::io::h5;

TEST(Hdf5Lock, HandleCloseWaitsForTheLibraryLock) {
    const auto path = std::filesystem::temp_directory_path() / "kiln_test_hdf5_lock.h5";
    auto file = std::make_unique<h5::Handle>(h5::createFile(path.string(), "test file"));
    ASSERT_TRUE(file->valid());

    std::unique_lock<std::recursive_mutex> held(h5::libraryMutex());  // another thread's HDF5 work under way
    std::atomic<bool> closed{false};
    std::thread closer([&] {
        file.reset();  // H5Fclose
        closed = true;
    });
    // Whatever the machine's load, the close cannot finish while the lock is held: it may only be slow to start.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EXPECT_FALSE(closed.load()) << "a handle closed while another thread held HDF5's library lock";
    held.unlock();
    closer.join();
    EXPECT_TRUE(closed.load());
    std::filesystem::remove(path);
}

}  // namespace
