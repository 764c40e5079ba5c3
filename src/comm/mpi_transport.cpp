#include "kiln/comm/deadline.hpp"
#include "kiln/comm/mpi_check.hpp"
#include "kiln/comm/transport.hpp"
#include "kiln/comm/ulfm.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <exception>
#include <vector>

namespace kiln::comm {
namespace {

// MPI counts are int: large messages go in pieces of at most 1 GiB.
constexpr std::size_t kPiece = std::size_t{1} << 30;

// Requests of sends that ended in an error (a dead peer, a revoked
// communicator). Never freed: Open MPI's ob1 layer may still report such a
// send's failure later, and for a freed request it reports it on no
// communicator, where errors are fatal ("Send error after request freed":
// seen aborting whole jobs in a recovery). A few handles per failure.
std::vector<MPI_Request>& parkedRequests() {
    static std::vector<MPI_Request> parked;
    return parked;
}

class MpiTransport final : public Transport {
public:
    // Over a duplicate of `comm` (owned), all its ranks.
    explicit MpiTransport(MPI_Comm comm) : owned_(true) {
        KILN_MPI(MPI_Comm_dup(comm, &comm_));
        KILN_MPI(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));  // a borrowed one's handler is its owner's
        int size = 0;
        KILN_MPI(MPI_Comm_size(comm_, &size));
        for (int r = 0; r < size; ++r) group_.push_back(r);
        join();
    }
    // Over `comm` itself (borrowed: nothing is created), among the ranks `group`, with its own tag.
    MpiTransport(MPI_Comm comm, std::vector<int> group, int tag, std::string label)
        : comm_(comm), group_(std::move(group)), tag_(tag), label_(std::move(label)) {
        join();
    }
    ~MpiTransport() override {
        // Sends still pending belong to a step that failed: park them (see parkedRequests).
        for (auto r : requests_)
            if (r != MPI_REQUEST_NULL) parkedRequests().push_back(r);
        if (owned_) MPI_Comm_free(&comm_);  // allowed with operations pending; released when they end
    }

    std::string name() const override { return "mpi"; }
    int rank() const override { return rank_; }
    int size() const override { return size_; }

    void send(const void* data, std::size_t bytes, int peer) override {
        const auto* p = static_cast<const char*>(data);
        std::size_t off = 0;
        do {  // at least one message, so an empty send still pairs with its recv
            const int n = static_cast<int>(std::min(kPiece, bytes - off));
            // Started and polled, as a receive is: a blocking MPI_Send gives no sign of life while a slow or lossy
            // link carries it, and the step's deadline took such a send for a thread hung outside MPI (two healthy
            // ranks ended themselves behind 50 ms and 5 % loss).
            MPI_Request request = MPI_REQUEST_NULL;
            KILN_MPI(MPI_Isend(p + off, n, MPI_BYTE, group_.at(peer), tag_, comm_, &request));
            int rc = MPI_SUCCESS;
            try {
                pollWithDeadline(
                    [&] {
                        int done = 0;
                        rc = MPI_Test(&request, &done, MPI_STATUS_IGNORE);
                        return done != 0 || rc != MPI_SUCCESS;
                    },
                    [&] { return fmt::format("{}: sending {} bytes to rank {}", what(), bytes, group_.at(peer)); });
            } catch (const CommunicationTimeout& e) {
                parkedRequests().push_back(request);  // the process ends: never freed under a live transfer
                throw CommunicationTimeout(e.what(), startupRanksOf(comm_, {group_.at(peer)}));
            }
            if (rc != MPI_SUCCESS && request != MPI_REQUEST_NULL) parkedRequests().push_back(request);
            KILN_MPI(rc);
            off += static_cast<std::size_t>(n);
        } while (off < bytes);
    }

    void recv(void* data, std::size_t bytes, int peer) override {
        auto* p = static_cast<char*>(data);
        std::size_t off = 0;
        do {
            const int n = static_cast<int>(std::min(kPiece, bytes - off));
            MPI_Request request = MPI_REQUEST_NULL;
            KILN_MPI(MPI_Irecv(p + off, n, MPI_BYTE, group_.at(peer), tag_, comm_, &request));
            int rc = MPI_SUCCESS;
            try {
                pollWithDeadline(
                    [&] {
                        int done = 0;
                        rc = MPI_Test(&request, &done, MPI_STATUS_IGNORE);
                        return done != 0 || rc != MPI_SUCCESS;
                    },
                    [&] { return fmt::format("{}: receiving {} bytes from rank {}", what(), bytes, group_.at(peer)); });
            } catch (const CommunicationTimeout& e) {
                parkedRequests().push_back(request);  // the process ends: never freed under a live transfer
                throw CommunicationTimeout(e.what(), startupRanksOf(comm_, {group_.at(peer)}));
            }
            // A receive that ended in an error is complete (freed); one still pending is parked.
            if (rc != MPI_SUCCESS && request != MPI_REQUEST_NULL) parkedRequests().push_back(request);
            KILN_MPI(rc);
            off += static_cast<std::size_t>(n);
        } while (off < bytes);
    }

    // Persistent requests (MPI_Send_init + MPI_Start): completing one does not
    // free it, so kiln decides when it is freed (see parkedRequests).
    std::uint64_t sendAsync(const void* data, std::size_t bytes, int peer) override {
        const auto* p = static_cast<const char*>(data);
        const std::uint64_t ticket = nextTicket_++;
        std::size_t off = 0;
        do {  // one message per piece, all under the same ticket
            const int n = static_cast<int>(std::min(kPiece, bytes - off));
            MPI_Request request = MPI_REQUEST_NULL;
            KILN_MPI(MPI_Send_init(p + off, n, MPI_BYTE, group_.at(peer), tag_, comm_, &request));
            requests_.push_back(request);
            tickets_.push_back(ticket);
            peerOf_.push_back(group_.at(peer));
            KILN_MPI(MPI_Start(&requests_.back()));
            off += static_cast<std::size_t>(n);
        } while (off < bytes);
        return ticket;
    }

    std::vector<std::uint64_t> completedSends() override {
        std::vector<std::uint64_t> done;
        if (requests_.empty()) return done;
        int count = 0;
        std::vector<int> indices(requests_.size());
        std::vector<MPI_Status> statuses(requests_.size());
        const int rc = MPI_Testsome(static_cast<int>(requests_.size()), requests_.data(), &count, indices.data(),
                                    statuses.data());
        if (count == MPI_UNDEFINED) count = 0;
        std::vector<bool> finished(requests_.size(), false);
        for (int i = 0; i < count; ++i) finished[static_cast<std::size_t>(indices[i])] = true;
        retire(finished, rc == MPI_SUCCESS ? nullptr : &statuses, indices, count);
        // A ticket is done when none of its pieces is still pending.
        std::vector<std::uint64_t> pendingTickets = tickets_;
        for (auto t : finishedTickets_)
            if (std::find(pendingTickets.begin(), pendingTickets.end(), t) == pendingTickets.end() &&
                std::find(done.begin(), done.end(), t) == done.end())
                done.push_back(t);
        finishedTickets_.clear();
        checkStatuses(rc, statuses, count, "MPI_Testsome");
        return done;
    }

    void waitSends() override {
        if (requests_.empty()) return;
        const int count = static_cast<int>(requests_.size());
        std::vector<MPI_Status> statuses(requests_.size());
        int rc = MPI_SUCCESS;
        try {
            pollWithDeadline(
                [&] {
                    int done = 0;
                    rc = MPI_Testall(count, requests_.data(), &done, statuses.data());
                    return done != 0 || rc != MPI_SUCCESS;
                },
                [&] {
                    std::vector<int> peers;
                    for (std::size_t i = 0; i < requests_.size(); ++i) peers.push_back(peerOf_[i]);
                    std::sort(peers.begin(), peers.end());
                    peers.erase(std::unique(peers.begin(), peers.end()), peers.end());
                    return fmt::format("{}: {} send{} to rank{} {} not taken", what(), count, count == 1 ? "" : "s",
                                       peers.size() == 1 ? "" : "s", fmt::join(peers, ", "));
                });
        } catch (const CommunicationTimeout& e) {
            const std::vector<int> silent = startupRanksOf(comm_, peerOf_);
            for (auto r : requests_) parkedRequests().push_back(r);
            requests_.clear();
            tickets_.clear();
            peerOf_.clear();
            throw CommunicationTimeout(e.what(), silent);
        }
        std::vector<int> indices(requests_.size());
        for (int i = 0; i < count; ++i) indices[static_cast<std::size_t>(i)] = i;
        // After an error some requests may still be pending (MPI_ERR_PENDING): they are parked too.
        std::vector<bool> finished(requests_.size(), rc == MPI_SUCCESS);
        if (rc == MPI_ERR_IN_STATUS)
            for (int i = 0; i < count; ++i) finished[static_cast<std::size_t>(i)] = statuses[static_cast<std::size_t>(i)].MPI_ERROR != MPI_ERR_PENDING;
        retire(finished, rc == MPI_SUCCESS ? nullptr : &statuses, indices, count);
        for (auto r : requests_) parkedRequests().push_back(r);  // whatever is still pending after an error
        requests_.clear();
        tickets_.clear();
        peerOf_.clear();
        finishedTickets_.clear();
        checkStatuses(rc, statuses, count, "MPI_Waitall");
    }

    bool deviceMemory() const override { return false; }

    // A ring over the group's ranks (reduce-scatter, then all-gather) in point-to-point messages on the
    // communicator: no collective, so a group needs no communicator of its own. Every element is summed
    // in an order fixed by the group (the same in every step).
    void allReduceSum(float* data, std::size_t count) override {
        const int k = size_;
        if (k <= 1 || count == 0) return;
        std::vector<std::size_t> begin(static_cast<std::size_t>(k) + 1, 0);
        for (int c = 0; c < k; ++c) begin[c + 1] = begin[c] + count / k + (static_cast<std::size_t>(c) < count % k ? 1 : 0);
        const auto chunk = [&](int c) { return ((c % k) + k) % k; };
        const int next = (rank_ + 1) % k, previous = (rank_ + k - 1) % k;
        incoming_.resize(count / k + 1);
        for (int s = 0; s < k - 1; ++s) {  // after step s, chunk (rank - s - 1) holds s + 2 ranks' values
            const int out = chunk(rank_ - s), in = chunk(rank_ - s - 1);
            shift(data + begin[out], begin[out + 1] - begin[out], next, incoming_.data(), begin[in + 1] - begin[in], previous);
            float* into = data + begin[in];
            for (std::size_t i = 0, n = begin[in + 1] - begin[in]; i < n; ++i) into[i] += incoming_[i];
        }
        for (int s = 0; s < k - 1; ++s) {  // the finished chunks travel round
            const int out = chunk(rank_ + 1 - s), in = chunk(rank_ - s);
            shift(data + begin[out], begin[out + 1] - begin[out], next, data + begin[in], begin[in + 1] - begin[in], previous);
        }
    }

    // Several buffers go as one message through a staging copy: one
    // collective's latency instead of one per buffer.
    void allReduceSumAsync(const std::vector<Floats>& buffers) override {
        if (buffers.size() == 1) return allReduceSum(buffers.front().data, buffers.front().count);
        std::size_t total = 0;
        for (const auto& b : buffers) total += b.count;
        staging_.resize(total);
        std::size_t offset = 0;
        for (const auto& b : buffers) offset = std::copy(b.data, b.data + b.count, staging_.begin() + offset) - staging_.begin();
        allReduceSum(staging_.data(), total);
        offset = 0;
        for (const auto& b : buffers) {
            std::copy(staging_.begin() + offset, staging_.begin() + offset + b.count, b.data);
            offset += b.count;
        }
    }
    void waitAllReduces() override {}

    // A borrowed communicator is its owner's to revoke (recovery revokes the control communicator),
    // and after a recovery it may already be freed: touching it then crashed inside Open MPI.
    void interrupt() override {
        if (owned_ && ulfmActive()) revoke(comm_);
    }

private:
    void join() {
        int rank = 0;
        KILN_MPI(MPI_Comm_rank(comm_, &rank));
        const auto me = std::find(group_.begin(), group_.end(), rank);
        rank_ = me == group_.end() ? -1 : static_cast<int>(me - group_.begin());
        size_ = static_cast<int>(group_.size());
    }

    // Sends `outCount` floats to `to` while receiving `inCount` from `from` (one ring step). The receive
    // blocks: a receive request left pending on a peer that died would outlive the communicator a recovery
    // frees, and Open MPI's progress then crashed on it (seen under Slurm).
    void shift(const float* out, std::size_t outCount, int to, float* in, std::size_t inCount, int from) {
        sendAsync(out, outCount * sizeof(float), to);
        recv(in, inCount * sizeof(float), from);
        waitSends();
    }

    // Removes the finished requests: freed when they succeeded, parked when
    // they ended in an error (`statuses` given, indexed as `indices` says).
    void retire(const std::vector<bool>& finished, const std::vector<MPI_Status>* statuses, const std::vector<int>& indices,
                int count) {
        std::vector<int> errorOf(requests_.size(), MPI_SUCCESS);
        if (statuses)
            for (int i = 0; i < count; ++i)
                errorOf[static_cast<std::size_t>(indices[static_cast<std::size_t>(i)])] =
                    (*statuses)[static_cast<std::size_t>(i)].MPI_ERROR;
        std::vector<MPI_Request> kept;
        std::vector<std::uint64_t> keptTickets;
        std::vector<int> keptPeers;
        for (std::size_t i = 0; i < requests_.size(); ++i) {
            if (!finished[i]) {
                kept.push_back(requests_[i]);
                keptTickets.push_back(tickets_[i]);
                keptPeers.push_back(peerOf_[i]);
                continue;
            }
            finishedTickets_.push_back(tickets_[i]);
            if (errorOf[i] == MPI_SUCCESS) {
                MPI_Request_free(&requests_[i]);  // an inactive persistent request: nothing of it is left in flight
            } else {
                parkedRequests().push_back(requests_[i]);
            }
        }
        requests_ = std::move(kept);
        tickets_ = std::move(keptTickets);
        peerOf_ = std::move(keptPeers);
    }

    // What this transport carries and among whom, for a timeout's message.
    std::string what() const {
        const std::string among = fmt::format("ranks {} of the control communicator, tag {}", fmt::join(group_, ","), tag_);
        return label_.empty() ? fmt::format("MPI transfers among {}", among) : fmt::format("{} ({})", label_, among);
    }

    // A multiple-completion call reports a failed request as MPI_ERR_IN_STATUS;
    // the error that matters (a dead peer, a revoked communicator) is in its status.
    static void checkStatuses(int rc, const std::vector<MPI_Status>& statuses, int count, const char* call) {
        if (rc != MPI_ERR_IN_STATUS) {
            checkMpi(rc, call, __FILE__, __LINE__);
            return;
        }
        for (int i = 0; i < count; ++i) {
            const int error = statuses[static_cast<std::size_t>(i)].MPI_ERROR;
            if (error != MPI_SUCCESS && error != MPI_ERR_PENDING) checkMpi(error, call, __FILE__, __LINE__);
        }
        checkMpi(rc, call, __FILE__, __LINE__);
    }

    MPI_Comm comm_ = MPI_COMM_NULL;
    bool owned_ = false;
    std::vector<int> group_;  // ranks of comm_, in group order
    int tag_ = 7;
    std::vector<float> incoming_;  // a ring step's received chunk
    std::vector<MPI_Request> requests_;
    std::vector<std::uint64_t> tickets_;  // of each request
    std::vector<int> peerOf_;             // of each request: the rank of comm_ it sends to
    std::string label_;                   // what it carries, for errors
    std::vector<std::uint64_t> finishedTickets_;
    std::vector<float> staging_;  // for sums of several buffers
    std::uint64_t nextTicket_ = 1;
    int rank_ = 0;
    int size_ = 1;
};

}  // namespace

std::unique_ptr<Transport> makeMpiTransport(MPI_Comm comm) { return std::make_unique<MpiTransport>(comm); }

std::unique_ptr<Transport> makeMpiGroupTransport(MPI_Comm comm, std::vector<int> group, int tag, std::string label) {
    return std::make_unique<MpiTransport>(comm, std::move(group), tag, std::move(label));
}

}  // namespace kiln::comm
