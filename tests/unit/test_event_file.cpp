// TensorBoard's record framing as kiln writes it: CRC-32C (Castagnoli) of the
// standard check string, masked as the records store it; every record of a
// file reads back as length, masked CRC of the length, data, masked CRC of
// the data; a directory that cannot be made is refused by name. (The
// contents are read by TensorBoard's own reader in cli_tensorboard.)
#include "kiln/base/error.hpp"
#include "kiln/io/event_file.hpp"
#include "../support/error_text.hpp"

#include "../support/scratch_dir.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

using namespace kiln;

TEST(EventFile, MaskedCrc32cOfTheCheckString) {
    const std::uint32_t crc = 0xE3069283u;  // CRC-32C of "123456789"
    EXPECT_EQ(io::maskedCrc32c("123456789", 9), ((crc >> 15) | (crc << 17)) + 0xa282ead8u);
}

TEST(EventFile, EveryRecordIsFramedAndChecksummed) {
    const auto dir = kiln::test::processScratch("kiln-events");
    std::string path;
    {
        io::EventFile f(dir.string());
        f.scalar("train/loss", 3, 2.5, 1e9);
        f.text("kiln/events/failure", 3, "node 2 lost", 1e9);
        f.sessionStart(4, 1e9);
        path = f.path();
    }
    EXPECT_NE(std::filesystem::path(path).filename().string().find("tfevents"), std::string::npos);
    std::ifstream in(path, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::size_t at = 0, records = 0;
    while (at < bytes.size()) {
        ASSERT_LE(at + 12, bytes.size());
        std::uint64_t length = 0;
        std::uint32_t lengthCrc = 0, dataCrc = 0;
        std::memcpy(&length, bytes.data() + at, 8);
        std::memcpy(&lengthCrc, bytes.data() + at + 8, 4);
        EXPECT_EQ(lengthCrc, io::maskedCrc32c(bytes.data() + at, 8));
        ASSERT_LE(at + 12 + length + 4, bytes.size());
        std::memcpy(&dataCrc, bytes.data() + at + 12 + length, 4);
        EXPECT_EQ(dataCrc, io::maskedCrc32c(bytes.data() + at + 12, length));
        at += 12 + length + 4;
        ++records;
    }
    EXPECT_EQ(records, 4u);  // the version, a scalar, a text, a session start
    EXPECT_NE(bytes.find("brain.Event:2"), std::string::npos);
    EXPECT_NE(bytes.find("train/loss"), std::string::npos);
    std::filesystem::remove_all(dir);
}

TEST(EventFile, ADirectoryThatCannotBeWrittenIsNamed) {
    const auto text = kiln::test::errorOf([] { io::EventFile f("/proc/kiln-no-such"); });
    EXPECT_NE(text.find("/proc/kiln-no-such: cannot write TensorBoard's event files there"), std::string::npos) << text;
}
