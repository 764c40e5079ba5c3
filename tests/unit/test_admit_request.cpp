// The admission request file: the number of nodes (1 when empty), optional hosts; anything else refused
// with the file's name; taken once.
#include "kiln/fault/admit_request.hpp"

#include "../support/scratch_dir.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <fstream>

namespace {

std::filesystem::path requestFile(const std::string& text) {
    const auto dir = kiln::test::processScratch("kiln-admit");
    std::filesystem::create_directories(dir);
    const auto path = dir / "admit";
    std::ofstream(path) << text;
    return path;
}

}  // namespace

using kiln::fault::takeAdmitRequest;

TEST(AdmitRequest, NoFileIsNoRequest) {
    const auto r = takeAdmitRequest(std::filesystem::temp_directory_path() / "kiln-no-such-dir" / "admit");
    EXPECT_EQ(r.nodes, 0);
    EXPECT_TRUE(r.problem.empty());
}

TEST(AdmitRequest, CountsHostsAndEmptyFiles) {
    auto path = requestFile("3 nodeA,nodeB\n");
    auto r = takeAdmitRequest(path);
    EXPECT_EQ(r.nodes, 3);
    EXPECT_EQ(r.hosts, "nodeA,nodeB");
    EXPECT_FALSE(std::filesystem::exists(path)) << "a request is taken once";
    r = takeAdmitRequest(path = requestFile(""));
    EXPECT_EQ(r.nodes, 1);
    EXPECT_TRUE(r.hosts.empty());
}

TEST(AdmitRequest, MalformedRequestsAreRefusedByName) {
    for (const char* text : {"two", "0", "-1", "2x", "5000", "1 host extra"}) {
        const auto path = requestFile(text);
        const auto r = takeAdmitRequest(path);
        EXPECT_EQ(r.nodes, 0) << text;
        EXPECT_NE(r.problem.find(path.string()), std::string::npos) << r.problem;
        EXPECT_NE(r.problem.find("expected the number of nodes"), std::string::npos) << r.problem;
        EXPECT_FALSE(std::filesystem::exists(path));
    }
}
