// Files written atomically (decks resolved, manifests, checkpoint indexes):
// the content is replaced whole with no temporary left behind, and an
// unwritable directory is an error that names the path.
#include "kiln/io/atomic_file.hpp"

#include "../support/scratch_dir.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace fs = std::filesystem;

namespace {
std::string slurp(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}
}  // namespace

TEST(AtomicFile, ReplacesContentAndLeavesNoTemporary) {
    const fs::path dir = kiln::test::processScratch("kiln-atomic");
    fs::remove_all(dir);
    const fs::path file = dir / "sub" / "x.txt";
    kiln::io::writeFileAtomically(file, "first");
    kiln::io::writeFileAtomically(file, "second");
    EXPECT_EQ(slurp(file), "second");
    int entries = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(file.parent_path())) ++entries;
    EXPECT_EQ(entries, 1);
    fs::remove_all(dir);
}

TEST(AtomicFile, UnwritableDirectoryIsAnErrorNamingThePath) {
    try {
        kiln::io::writeFileAtomically("/proc/kiln-cannot-write-here", "x");
        FAIL() << "no error";
    } catch (const std::exception& e) {
        EXPECT_NE(std::string(e.what()).find("kiln-cannot-write-here"), std::string::npos) << e.what();
    }
}
