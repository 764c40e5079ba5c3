// The MPI tensor transport: ring send/recv of several sizes (including empty),
// in-place sums, exchanges, and a pipeline's links, checked value by value.
#include "kiln/comm/heartbeat.hpp"
#include "kiln/comm/link_transport.hpp"
#include "kiln/comm/transport.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <numeric>
#include <thread>
#include <vector>

namespace {

// The tickets completedSends() returns until `count` came back, polling for
// up to 30 s (a peer on a loaded machine may take long to receive; a fixed
// number of polls failed a CI run).
std::vector<std::uint64_t> ticketsWithin(kiln::comm::Transport& t, std::size_t count) {
    std::vector<std::uint64_t> done;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (done.size() < count && std::chrono::steady_clock::now() < until) {
        for (auto ticket : t.completedSends()) done.push_back(ticket);
        std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    return done;
}

}  // namespace

TEST(MpiTransport, RingSendRecv) {
    auto t = kiln::comm::makeMpiTransport(MPI_COMM_WORLD);
    const int next = (t->rank() + 1) % t->size(), prev = (t->rank() + t->size() - 1) % t->size();
    for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{1000}, std::size_t{1} << 20}) {
        std::vector<float> out(n), in(n, -1.0f);
        std::iota(out.begin(), out.end(), static_cast<float>(t->rank() * 10));
        // Even ranks send first; odd ranks receive first: no deadlock on any ring size.
        if (t->rank() % 2 == 0) {
            t->send(out.data(), n * sizeof(float), next);
            t->recv(in.data(), n * sizeof(float), prev);
        } else {
            t->recv(in.data(), n * sizeof(float), prev);
            t->send(out.data(), n * sizeof(float), next);
        }
        for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(in[i], static_cast<float>(prev * 10 + i)) << "n=" << n;
    }
}

// Every rank posts all its sends before any receive (what a pipeline stage
// does): with blocking sends of this size it would deadlock; asynchronous
// sends complete, their tickets come back once each, and the data arrives.
TEST(MpiTransport, AsyncSendsDoNotBlock) {
    auto t = kiln::comm::makeMpiTransport(MPI_COMM_WORLD);
    const int next = (t->rank() + 1) % t->size(), prev = (t->rank() + t->size() - 1) % t->size();
    const std::size_t n = std::size_t{1} << 20;  // 4 MiB: past any eager limit
    std::vector<std::vector<float>> out(3, std::vector<float>(n));
    std::vector<std::uint64_t> tickets;
    for (int k = 0; k < 3; ++k) {
        std::fill(out[k].begin(), out[k].end(), static_cast<float>(t->rank() * 100 + k));
        tickets.push_back(t->sendAsync(out[k].data(), n * sizeof(float), next));
    }
    std::vector<float> in(n);
    for (int k = 0; k < 3; ++k) {
        t->recv(in.data(), n * sizeof(float), prev);
        ASSERT_EQ(in.front(), static_cast<float>(prev * 100 + k));
        ASSERT_EQ(in.back(), static_cast<float>(prev * 100 + k));
    }
    auto done = ticketsWithin(*t, 3);
    t->waitSends();
    std::sort(done.begin(), done.end());
    EXPECT_EQ(done, tickets);
}

TEST(MpiTransport, AllReduceSum) {
    auto t = kiln::comm::makeMpiTransport(MPI_COMM_WORLD);
    std::vector<float> v(4097);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(t->rank() + i);
    t->allReduceSum(v.data(), v.size());
    const int n = t->size();
    for (std::size_t i = 0; i < v.size(); ++i) ASSERT_EQ(v[i], static_cast<float>(n * (n - 1) / 2 + n * i));
}

// Sums among groups of the world's ranks, on the world itself (no communicator created): the whole world in
// reverse order, and two of the three ranks while the third sums alone; sizes that do not divide evenly,
// including fewer values than ranks.
TEST(MpiTransport, GroupSumsWithoutACommunicator) {
    int rank = 0, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    ASSERT_EQ(size, 3);
    for (std::size_t count : {std::size_t{1}, std::size_t{2}, std::size_t{10}, std::size_t{4097}}) {
        auto all = kiln::comm::makeMpiGroupTransport(MPI_COMM_WORLD, {2, 1, 0}, 40);
        EXPECT_EQ(all->rank(), 2 - rank);
        std::vector<float> v(count);
        for (std::size_t i = 0; i < count; ++i) v[i] = static_cast<float>(rank + i);
        all->allReduceSum(v.data(), v.size());
        for (std::size_t i = 0; i < count; ++i) ASSERT_EQ(v[i], static_cast<float>(3 + 3 * i)) << count << " " << i;
        if (rank == 1) continue;  // ranks 0 and 2 sum; rank 1 takes no part
        auto pair = kiln::comm::makeMpiGroupTransport(MPI_COMM_WORLD, {0, 2}, 41);
        std::fill(v.begin(), v.end(), static_cast<float>(rank + 1));
        pair->allReduceSum(v.data(), v.size());
        for (float x : v) ASSERT_EQ(x, 4.0f);
    }
}

// Started sums (a bucket of two buffers, then one of one) are complete once
// waitAllReduces() returned, each buffer with its own values.
TEST(MpiTransport, StartedSumsComplete) {
    auto t = kiln::comm::makeMpiTransport(MPI_COMM_WORLD);
    std::vector<std::vector<float>> v(3, std::vector<float>(1000));
    for (int k = 0; k < 3; ++k) std::fill(v[k].begin(), v[k].end(), static_cast<float>(t->rank() + 10 * k));
    t->allReduceSumAsync({{v[0].data(), v[0].size()}, {v[1].data(), v[1].size()}});
    t->allReduceSumAsync({{v[2].data(), v[2].size()}});
    t->waitAllReduces();
    const int n = t->size();
    for (int k = 0; k < 3; ++k)
        for (float x : v[k]) ASSERT_EQ(x, static_cast<float>(n * (n - 1) / 2 + n * 10 * k)) << "sum " << k;
}

TEST(NcclTransport, ReportsWhetherBuiltIn) {
    if (kiln::comm::ncclBuiltIn()) {
        EXPECT_NE(kiln::comm::ncclVersion().find('.'), std::string::npos);
    } else {
        EXPECT_THROW(kiln::comm::makeNcclTransport(MPI_COMM_WORLD, 0, std::chrono::seconds(1)), std::exception);
    }
}

// Ranks without a GPU never get NCCL, and the reason names what is missing;
// in a CUDA build this runs the collective that compares GPUs across ranks.
TEST(NcclTransport, NotWithoutAGpuPerRank) {
    std::string why;
    EXPECT_FALSE(kiln::comm::ncclCanConnect(MPI_COMM_WORLD, -1, why));
    EXPECT_NE(why.find(kiln::comm::ncclBuiltIn() ? "has no GPU" : "built without NCCL"), std::string::npos) << why;
}

// A pipeline's links on 3 ranks placed out of rank order (stages on ranks 2,
// 0, 1): every rank sends 3 messages of 4 MiB to each neighbour before it
// receives any, the data arrive in order, each ticket comes back once, and a
// rank that is not a neighbour is refused by name.
TEST(LinkTransport, NeighboursExchangeInOrder) {
    int rank = 0, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    ASSERT_EQ(size, 3);
    const std::vector<int> stageRanks = {2, 0, 1};
    const int stage = static_cast<int>(std::find(stageRanks.begin(), stageRanks.end(), rank) - stageRanks.begin());
    std::vector<int> peers;
    if (stage > 0) peers.push_back(stageRanks[static_cast<std::size_t>(stage - 1)]);
    if (stage < 2) peers.push_back(stageRanks[static_cast<std::size_t>(stage + 1)]);
    auto t = kiln::comm::makeLinkTransport(MPI_COMM_WORLD, peers,
                                           [](MPI_Comm pair) { return kiln::comm::makeMpiTransport(pair); });
    EXPECT_FALSE(t->deviceMemory());
    const std::size_t n = std::size_t{1} << 20;
    std::vector<std::vector<float>> out;
    std::vector<std::uint64_t> tickets;
    for (int k = 0; k < 3; ++k)
        for (int peer : peers) {
            out.emplace_back(n, static_cast<float>(rank * 100 + peer * 10 + k));
            tickets.push_back(t->sendAsync(out.back().data(), n * sizeof(float), peer));
        }
    std::vector<float> in(n);
    for (int k = 0; k < 3; ++k)
        for (int peer : peers) {
            t->recv(in.data(), n * sizeof(float), peer);
            ASSERT_EQ(in.front(), static_cast<float>(peer * 100 + rank * 10 + k)) << "from " << peer;
            ASSERT_EQ(in.back(), static_cast<float>(peer * 100 + rank * 10 + k)) << "from " << peer;
        }
    auto done = ticketsWithin(*t, tickets.size());
    t->waitSends();
    std::sort(done.begin(), done.end());
    EXPECT_EQ(done, tickets);
    const int stranger = stage == 1 ? -1 : rank == 2 ? 1 : 2;  // the end stages are not linked
    if (stranger >= 0) {
        const auto error = [&] {
            try {
                t->sendAsync(out.front().data(), 4, stranger);
            } catch (const std::exception& e) {
                return std::string(e.what());
            }
            return std::string();
        }();
        EXPECT_NE(error.find("has no link to rank " + std::to_string(stranger)), std::string::npos) << error;
    }
}

// Two ranks that each send the other a large message exchange without waiting.
TEST(MpiTransport, ExchangeBothWays) {
    auto t = kiln::comm::makeMpiTransport(MPI_COMM_WORLD);
    const int next = (t->rank() + 1) % t->size(), prev = (t->rank() + t->size() - 1) % t->size();
    const std::size_t n = std::size_t{1} << 20;
    std::vector<float> toNext(n, static_cast<float>(t->rank())), toPrev(n, static_cast<float>(t->rank() + 50));
    std::vector<float> fromPrev(n), fromNext(n);
    t->exchange({{toNext.data(), n * sizeof(float), next}, {toPrev.data(), n * sizeof(float), prev}},
                {{fromPrev.data(), n * sizeof(float), prev}, {fromNext.data(), n * sizeof(float), next}});
    EXPECT_EQ(fromPrev.back(), static_cast<float>(prev));
    EXPECT_EQ(fromNext.back(), static_cast<float>(next + 50));
}

// A wait that makes no progress for the training thread's limit
// (fault.step_timeout_s) is an error naming what it waited for, not a hang:
// a receive whose sender never sends, and a large send nobody receives.
TEST(MpiTransport, StuckWaitsEndWithTheirStory) {
    MPI_Comm comm = MPI_COMM_NULL;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    auto t = kiln::comm::makeMpiGroupTransport(comm, {0, 1, 2}, 50, "the test's sums");
    std::vector<float> small(4, 1.0f), large(std::size_t{1} << 20, 2.0f);  // 4 MiB: past any eager limit
    kiln::comm::setTrainingThreadLimit(0.5);
    if (t->rank() == 0) {
        try {
            t->recv(small.data(), small.size() * sizeof(float), 1);
            ADD_FAILURE() << "a receive from a rank that never sent returned";
        } catch (const kiln::comm::CommunicationTimeout& e) {
            const std::string message = e.what();
            EXPECT_EQ(message.rfind("no progress for ", 0), 0u) << message;
            EXPECT_NE(message.find(" s (fault.step_timeout_s, plus twice fault.hang_timeout_s for the detector to find a "
                                   "hung peer first) in the test's sums (ranks 0,1,2 of the control communicator, tag "
                                   "50): receiving 16 bytes from rank 1"),
                      std::string::npos)
                << message;
        }
    } else if (t->rank() == 1) {
        t->sendAsync(large.data(), large.size() * sizeof(float), 2);
        try {
            t->waitSends();
            ADD_FAILURE() << "a send nobody received finished";
        } catch (const kiln::comm::CommunicationTimeout& e) {
            EXPECT_NE(std::string(e.what()).find("1 send to rank 2 not taken"), std::string::npos) << e.what();
        }
    }
    kiln::comm::setTrainingThreadLimit(0);
    // What was left waiting is taken, so that nothing is pending at the end.
    MPI_Barrier(MPI_COMM_WORLD);
    if (t->rank() == 1) MPI_Send(small.data(), 16, MPI_BYTE, 0, 50, comm);
    if (t->rank() == 2) MPI_Recv(large.data(), static_cast<int>(large.size() * sizeof(float)), MPI_BYTE, 1, 50, comm, MPI_STATUS_IGNORE);
    MPI_Barrier(MPI_COMM_WORLD);
    t.reset();
    MPI_Comm_free(&comm);
}
