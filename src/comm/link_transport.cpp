#include "kiln/comm/link_transport.hpp"

#include "kiln/base/error.hpp"
#include "kiln/comm/mpi_check.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace kiln::comm {
namespace {

// A 2-rank communicator of `comm`: `from` is its rank 0, `to` its rank 1.
// Collective over the two only (MPI_Comm_create_group).
MPI_Comm pairOf(MPI_Comm comm, int from, int to) {
    MPI_Group all = MPI_GROUP_NULL, two = MPI_GROUP_NULL;
    KILN_MPI(MPI_Comm_group(comm, &all));
    const int members[2] = {from, to};
    KILN_MPI(MPI_Group_incl(all, 2, members, &two));
    MPI_Comm pair = MPI_COMM_NULL;
    // The tag tells the two directions between the same ranks apart.
    KILN_MPI(MPI_Comm_create_group(comm, two, from < to ? 1 : 2, &pair));
    MPI_Group_free(&two);
    MPI_Group_free(&all);
    return pair;
}

class LinkTransport final : public Transport {
public:
    LinkTransport(MPI_Comm comm, std::vector<int> peers, const PairTransportFactory& makePair) {
        KILN_MPI(MPI_Comm_rank(comm, &rank_));
        KILN_MPI(MPI_Comm_size(comm, &size_));
        std::sort(peers.begin(), peers.end());
        peers.erase(std::unique(peers.begin(), peers.end()), peers.end());
        // Both ranks of a link build its two channels in the same order (from
        // the lower rank first); links in ascending peer order, which along a
        // pipeline lets each creation wait only for ranks that are already
        // there or on their way.
        for (int peer : peers) {
            if (peer < 0 || peer >= size_ || peer == rank_) continue;
            const int low = std::min(rank_, peer), high = std::max(rank_, peer);
            for (const auto& [from, to] : {std::pair{low, high}, std::pair{high, low}}) {
                MPI_Comm pair = pairOf(comm, from, to);
                auto channel = makePair(pair);
                MPI_Comm_free(&pair);
                (from == rank_ ? out_ : in_)[peer] = std::move(channel);
            }
        }
    }

    std::string name() const override { return out_.empty() ? "links" : out_.begin()->second->name() + " links"; }
    int rank() const override { return rank_; }
    int size() const override { return size_; }

    void send(const void* data, std::size_t bytes, int peer) override { channel(out_, peer).send(data, bytes, 1); }
    void recv(void* data, std::size_t bytes, int peer) override { channel(in_, peer).recv(data, bytes, 0); }

    std::uint64_t sendAsync(const void* data, std::size_t bytes, int peer) override {
        Transport& c = channel(out_, peer);
        const std::uint64_t ticket = nextTicket_++;
        pending_.push_back({ticket, &c, c.sendAsync(data, bytes, 1)});
        return ticket;
    }

    std::vector<std::uint64_t> completedSends() override {
        std::vector<std::uint64_t> done;
        for (auto& [peer, c] : out_) {
            const auto finished = c->completedSends();
            for (auto it = pending_.begin(); it != pending_.end();) {
                if (it->channel == c.get() &&
                    std::find(finished.begin(), finished.end(), it->channelTicket) != finished.end()) {
                    done.push_back(it->ticket);
                    it = pending_.erase(it);
                } else {
                    ++it;
                }
            }
        }
        return done;
    }

    void waitSends() override {
        for (auto& [peer, c] : out_) c->waitSends();
        pending_.clear();
    }

    bool deviceMemory() const override { return !out_.empty() && out_.begin()->second->deviceMemory(); }

    void allReduceSum(float*, std::size_t) override { refuse("sums"); }
    void allReduceSumAsync(const std::vector<Floats>&) override { refuse("sums"); }
    void waitAllReduces() override {}

    void interrupt() override {
        for (auto& [peer, c] : out_) c->interrupt();
        for (auto& [peer, c] : in_) c->interrupt();
    }

private:
    Transport& channel(std::map<int, std::unique_ptr<Transport>>& side, int peer) {
        const auto it = side.find(peer);
        if (it == side.end())
            throw LibraryError(fmt::format("rank {} has no link to rank {} (links are made for the neighbouring stages)",
                                           rank_, peer));
        return *it->second;
    }
    [[noreturn]] static void refuse(const char* what) {
        throw LibraryError(fmt::format("a pipeline's link transport carries no {}", what));
    }

    struct Pending {
        std::uint64_t ticket;
        Transport* channel;
        std::uint64_t channelTicket;
    };
    std::map<int, std::unique_ptr<Transport>> out_, in_;  // by peer: this rank sends / receives
    std::vector<Pending> pending_;
    std::uint64_t nextTicket_ = 1;
    int rank_ = 0, size_ = 1;
};

}  // namespace

std::unique_ptr<Transport> makeLinkTransport(MPI_Comm comm, std::vector<int> peers, const PairTransportFactory& pair) {
    return std::make_unique<LinkTransport>(comm, std::move(peers), pair);
}

}  // namespace kiln::comm
