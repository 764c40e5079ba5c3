// The quorum witness (io/quorum_witness.hpp): one side of a split job holds
// it, whichever side asks first; the holder finds its claim again in a later
// round with fewer members; a file system that gives no answer holds for no one.
#include "kiln/io/quorum_witness.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;
using kiln::io::claimQuorum;

namespace {

struct Dir {
    fs::path path = fs::temp_directory_path() / ("kiln-quorum-" + std::to_string(::getpid()));
    Dir() {
        fs::remove_all(path);
        fs::create_directories(path);
    }
    ~Dir() { fs::remove_all(path); }
};

}  // namespace

TEST(QuorumWitness, TheFirstSideHoldsItAndTheOtherIsRefusedByName) {
    Dir dir;
    const auto first = claimQuorum(dir.path, 7, {0, 1, 2, 3});
    EXPECT_TRUE(first.held) << first.problem;
    EXPECT_EQ(first.holders, "0,1,2,3");
    const auto other = claimQuorum(dir.path, 7, {4, 5});
    EXPECT_FALSE(other.held);
    EXPECT_TRUE(other.problem.empty()) << other.problem;
    EXPECT_EQ(other.holders, "0,1,2,3");
    // No draft of either claimant is left behind: the witness alone.
    int files = 0;
    for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir.path)) ++files;
    EXPECT_EQ(files, 1);
}

TEST(QuorumWitness, TheHoldingSideFindsItsClaimAgainAfterLosingAMember) {
    Dir dir;
    ASSERT_TRUE(claimQuorum(dir.path, 3, {0, 1, 2}).held);
    EXPECT_TRUE(claimQuorum(dir.path, 3, {1, 2}).held) << "a second round of the same recovery";
    EXPECT_FALSE(claimQuorum(dir.path, 3, {5}).held);
    // Another recovery (a later epoch) has a witness of its own.
    EXPECT_TRUE(claimQuorum(dir.path, 4, {5}).held);
}

TEST(QuorumWitness, OldWitnessesAreRemovedAndForeignFilesLeftAlone) {
    Dir dir;
    ASSERT_TRUE(claimQuorum(dir.path, 1, {0}).held);
    ASSERT_TRUE(claimQuorum(dir.path, 2, {0}).held);
    ASSERT_TRUE(claimQuorum(dir.path, 3, {0}).held);
    std::ofstream(dir.path / "quorum-notes.txt") << "mine\n";
    kiln::io::removeOldWitnesses(dir.path, 3);
    EXPECT_FALSE(fs::exists(dir.path / "quorum-00000001"));
    EXPECT_FALSE(fs::exists(dir.path / "quorum-00000002"));
    EXPECT_TRUE(fs::exists(dir.path / "quorum-00000003"));
    EXPECT_TRUE(fs::exists(dir.path / "quorum-notes.txt"));
}

TEST(QuorumWitness, NoAnswerFromTheFileSystemHoldsForNoOne) {
    Dir dir;
    // A witness that is not one (a file of something else under its name): nobody can tell, nobody holds it.
    std::ofstream(dir.path / "quorum-00000009") << "something else\n";
    const auto foreign = claimQuorum(dir.path, 9, {0});
    EXPECT_FALSE(foreign.held);
    EXPECT_NE(foreign.problem.find("not a quorum witness"), std::string::npos) << foreign.problem;
    // A directory that cannot be written.
    const fs::path file = dir.path / "plain-file";
    std::ofstream(file) << "x";
    const auto unreachable = claimQuorum(file / "run", 1, {0});
    EXPECT_FALSE(unreachable.held);
    EXPECT_NE(unreachable.problem.find("cannot create"), std::string::npos) << unreachable.problem;
}

TEST(QuorumWitness, AProcessOfAnotherSideSeesThatTheQuorumIsHeldElsewhere) {
    Dir dir;
    EXPECT_FALSE(kiln::io::quorumHeldElsewhere(dir.path, 5, 0)) << "no witness yet: nobody holds it";
    ASSERT_TRUE(claimQuorum(dir.path, 5, {3}).held);
    EXPECT_TRUE(kiln::io::quorumHeldElsewhere(dir.path, 5, 0));
    EXPECT_FALSE(kiln::io::quorumHeldElsewhere(dir.path, 5, 3));
    EXPECT_FALSE(kiln::io::quorumHeldElsewhere(dir.path, 6, 0)) << "another recovery's witness";
}
