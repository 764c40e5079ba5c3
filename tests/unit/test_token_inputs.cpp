// Flat files of token ids in kiln prep --format tokens (issue 39, item 3c):
// a headerless file (nanoGPT's train.bin) split into units of any size gives
// every document exactly once, whatever falls on a unit's edge: a separator,
// two separators in a row, a document's first or last id; a unit inside one
// long document gives none. The file's size must be whole ids of the type
// given, and an unknown type is refused by name.
#include "kiln/base/error.hpp"
#include "kiln/data/token_inputs.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

using namespace kiln::data;
namespace fs = std::filesystem;

namespace {

constexpr std::uint32_t kEos = 9;

class FlatTokenFile : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = fs::temp_directory_path() / ("kiln-token-inputs-" + std::to_string(::getpid()));
        fs::remove_all(dir_);
        fs::create_directories(dir_);
    }
    void TearDown() override { fs::remove_all(dir_); }

    std::string write(const std::string& name, const std::vector<std::uint16_t>& ids) {
        const auto path = (dir_ / name).string();
        std::ofstream(path, std::ios::binary)
            .write(reinterpret_cast<const char*>(ids.data()), static_cast<std::streamsize>(ids.size() * 2));
        return path;
    }

    // Every document of every unit, in order.
    static std::vector<std::vector<std::uint32_t>> readAll(const std::string& path, std::uint64_t splitBytes) {
        std::vector<std::vector<std::uint32_t>> documents;
        for (const auto& unit : planTokenUnits({path}, splitBytes, "uint16")) {
            TokenDocumentReader reader(unit, kEos, 100, "uint16");
            for (std::vector<std::uint32_t> document; reader.next(document);) documents.push_back(document);
        }
        return documents;
    }

    fs::path dir_;
};

TEST_F(FlatTokenFile, EveryDocumentOnceWhateverTheUnitSize) {
    // A leading separator, documents of 1 to 5 ids, doubled separators, no separator at the end.
    const std::vector<std::uint16_t> ids = {9, 1, 2, 3, 9, 4, 9, 9, 5, 6, 7, 8, 1, 9, 2, 9, 9, 9, 3, 4, 9, 5, 6};
    const std::vector<std::vector<std::uint32_t>> expected = {{1, 2, 3}, {4}, {5, 6, 7, 8, 1}, {2}, {3, 4}, {5, 6}};
    const auto path = write("train.bin", ids);
    for (std::uint64_t split = 2; split <= 2 * ids.size() + 2; split += 2) {
        SCOPED_TRACE("units of " + std::to_string(split / 2) + " ids");
        EXPECT_EQ(readAll(path, split), expected);
    }
    EXPECT_EQ(readAll(path, 0), expected);  // 0: the file is one unit
}

TEST_F(FlatTokenFile, UnitsInsideOneDocumentGiveNothing) {
    std::vector<std::uint16_t> ids(40, 7);
    ids.push_back(kEos);
    const auto path = write("long.bin", ids);
    const auto units = planTokenUnits({path}, 8, "uint16");
    ASSERT_EQ(units.size(), 11u);  // 41 ids in runs of 4
    std::vector<std::uint32_t> document;
    TokenDocumentReader first(units[0], kEos, 100, "uint16");
    ASSERT_TRUE(first.next(document));
    EXPECT_EQ(document.size(), 40u);
    EXPECT_FALSE(first.next(document));
    for (std::size_t u = 1; u < units.size(); ++u) {
        TokenDocumentReader reader(units[u], kEos, 100, "uint16");
        EXPECT_FALSE(reader.next(document)) << "unit " << u;
    }
}

TEST_F(FlatTokenFile, SizeAndTypeAreChecked) {
    const auto path = (dir_ / "odd.bin").string();
    std::ofstream(path, std::ios::binary).write("\1\0\2", 3);
    try {
        planTokenUnits({path}, 0, "uint16");
        FAIL() << "a file of 3 bytes was taken as uint16 ids";
    } catch (const kiln::InputError& e) {
        EXPECT_NE(std::string(e.what()).find("odd.bin': 3 bytes is not a whole number of uint16 ids"), std::string::npos)
            << e.what();
    }
    try {
        planTokenUnits({path}, 0, "float32");
        FAIL() << "float32 ids were accepted";
    } catch (const kiln::InputError& e) {
        EXPECT_NE(std::string(e.what()).find("--token-dtype float32: expected uint8, uint16"), std::string::npos) << e.what();
    }
    try {
        planTokenUnits({path}, 0, "");
        FAIL() << "a headerless file was accepted without --token-dtype";
    } catch (const kiln::InputError& e) {
        EXPECT_NE(std::string(e.what()).find("--token-dtype"), std::string::npos) << e.what();
    }
}

}  // namespace
