// Which /failures rows of an attempt whose launch was lost with a host are the launcher's teardown (issue 64):
// only those after the lost host's first row, of cause "process", on other hosts that are all known.
#include "kiln/io/teardown_rows.hpp"

#include <gtest/gtest.h>

using namespace kiln::io;

namespace {

FailureRecord row(double time, const std::string& nodes, const std::string& cause = "process") {
    FailureRecord r;
    r.time = time;
    fitText(r.retiredNodes, nodes);
    fitText(r.cause, cause);
    return r;
}

const std::vector<std::string> hosts = {"host2", "host3", "host4"};  // node 0, 1, 2

}  // namespace

TEST(TeardownRows, DeathsOnLiveHostsAfterTheLostHostsFirstRow) {
    // The slurm_hosts case: host4 (node 2) killed, recovered; then Open MPI's teardown took host3's rank.
    const std::vector<FailureRecord> rows = {row(100, "2"), row(100.4, "1")};
    EXPECT_EQ(teardownCasualties(rows, 50, hosts, "host4"), (std::vector<std::size_t>{1}));
}

TEST(TeardownRows, FailuresBeforeTheHostWasLostAreFailures) {
    const std::vector<FailureRecord> rows = {row(90, "1"), row(100, "2"), row(101, "0")};
    EXPECT_EQ(teardownCasualties(rows, 50, hosts, "host4"), (std::vector<std::size_t>{2}));
}

TEST(TeardownRows, OtherAttemptsCausesAndUnknownNodesStay) {
    const std::vector<FailureRecord> rows = {row(10, "2"), row(11, "1"),                    // an earlier attempt
                                             row(100, "2"), row(101, "1", "corruption"),     // not a death
                                             row(102, "7"), row(103, "0,1"), row(104, "x")}; // unknown node, bad text
    EXPECT_EQ(teardownCasualties(rows, 50, hosts, "host4"), (std::vector<std::size_t>{5}));
}

TEST(TeardownRows, NothingWithoutTheLostHostOrItsRow) {
    const std::vector<FailureRecord> rows = {row(100, "1"), row(101, "0")};
    EXPECT_TRUE(teardownCasualties(rows, 50, hosts, "host4").empty()) << "host4 never failed in this attempt";
    EXPECT_TRUE(teardownCasualties(rows, 50, hosts, "").empty()) << "the launcher named no host";
}

TEST(TeardownRows, SeveralLostHosts) {
    // A partition took host3 and host4 (nodes 1, 2); then the teardown took host2's rank: only that row.
    const std::vector<FailureRecord> rows = {row(100, "1"), row(100.2, "2"), row(100.4, "0")};
    EXPECT_EQ(teardownCasualties(rows, 50, hosts, "host3,host4"), (std::vector<std::size_t>{2}));
    EXPECT_EQ(teardownCasualties(rows, 50, hosts, "host4,"), (std::vector<std::size_t>{2}));
}

TEST(TeardownRows, LostHostsAsTheNextAttemptKnowsThem) {
    // The runtime named host3, which the requeue runs on again; host4 is the one it lacks.
    EXPECT_EQ(lostHostsOf("host3", hosts, {"host2", "host3", "host5"}), "host4");
    EXPECT_EQ(lostHostsOf("host4", hosts, {"host2", "host3", "host5"}), "host4") << "named right";
    EXPECT_EQ(lostHostsOf("host3,host4", hosts, {"host2", "host3"}), "host4") << "of those named, the one gone";
    EXPECT_EQ(lostHostsOf("", hosts, {"host2", "host3"}), "host4") << "named none";
    EXPECT_EQ(lostHostsOf("host4", hosts, hosts), "host4") << "back in the job: the launcher's word stands";
    EXPECT_EQ(lostHostsOf("host4", {}, {"host2"}), "host4") << "the lost attempt's hosts unknown";
}

TEST(TeardownRows, RetiredNodeLists) {
    EXPECT_EQ(retiredNodeIds("0,12"), (std::vector<std::size_t>{0, 12}));
    EXPECT_TRUE(retiredNodeIds("").empty());
    EXPECT_TRUE(retiredNodeIds("1,a").empty());
}
