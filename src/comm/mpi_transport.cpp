#include "kiln/comm/mpi_check.hpp"
#include "kiln/comm/transport.hpp"
#include "kiln/comm/ulfm.hpp"

#include <algorithm>
#include <exception>
#include <vector>

namespace kiln::comm {
namespace {

// MPI counts are int: large messages go in pieces of at most 1 GiB.
constexpr std::size_t kPiece = std::size_t{1} << 30;

class MpiTransport final : public Transport {
public:
    explicit MpiTransport(MPI_Comm comm) {
        KILN_MPI(MPI_Comm_dup(comm, &comm_));
        KILN_MPI(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
        KILN_MPI(MPI_Comm_rank(comm_, &rank_));
        KILN_MPI(MPI_Comm_size(comm_, &size_));
    }
    ~MpiTransport() override {
        // Sends still pending belong to a step that failed. They are completed,
        // not freed: a freed request that fails later is reported on no
        // communicator, where errors are fatal (seen: the whole job aborted in
        // a recovery). On the revoked communicator the waits end at once.
        bool pending = false;
        for (auto r : requests_) pending |= r != MPI_REQUEST_NULL;
        if (pending) {
            if (ulfmActive()) {
                try {
                    revoke(comm_);
                } catch (const std::exception&) {
                    // a destructor: the waits below end either way once the failure is known
                }
            }
            for (auto& r : requests_)
                if (r != MPI_REQUEST_NULL) MPI_Wait(&r, MPI_STATUS_IGNORE);
        }
        MPI_Comm_free(&comm_);
    }

    std::string name() const override { return "mpi"; }
    int rank() const override { return rank_; }
    int size() const override { return size_; }

    void send(const void* data, std::size_t bytes, int peer) override {
        const auto* p = static_cast<const char*>(data);
        std::size_t off = 0;
        do {  // at least one message, so an empty send still pairs with its recv
            const int n = static_cast<int>(std::min(kPiece, bytes - off));
            KILN_MPI(MPI_Send(p + off, n, MPI_BYTE, peer, kTag, comm_));
            off += static_cast<std::size_t>(n);
        } while (off < bytes);
    }

    void recv(void* data, std::size_t bytes, int peer) override {
        auto* p = static_cast<char*>(data);
        std::size_t off = 0;
        do {
            const int n = static_cast<int>(std::min(kPiece, bytes - off));
            KILN_MPI(MPI_Recv(p + off, n, MPI_BYTE, peer, kTag, comm_, MPI_STATUS_IGNORE));
            off += static_cast<std::size_t>(n);
        } while (off < bytes);
    }

    std::uint64_t sendAsync(const void* data, std::size_t bytes, int peer) override {
        // One message per piece, all under the same ticket.
        const auto* p = static_cast<const char*>(data);
        const std::uint64_t ticket = nextTicket_++;
        std::size_t off = 0;
        do {
            const int n = static_cast<int>(std::min(kPiece, bytes - off));
            MPI_Request request = MPI_REQUEST_NULL;
            KILN_MPI(MPI_Isend(p + off, n, MPI_BYTE, peer, kTag, comm_, &request));
            requests_.push_back(request);
            tickets_.push_back(ticket);
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
        checkStatuses(rc, statuses, count, "MPI_Testsome");
        if (count == MPI_UNDEFINED || count == 0) return done;
        // A ticket is done when none of its pieces is still pending.
        std::vector<std::uint64_t> keptTickets;
        std::vector<MPI_Request> kept;
        for (std::size_t i = 0; i < requests_.size(); ++i) {
            if (requests_[i] == MPI_REQUEST_NULL) continue;
            kept.push_back(requests_[i]);
            keptTickets.push_back(tickets_[i]);
        }
        for (std::size_t i = 0; i < requests_.size(); ++i)
            if (requests_[i] == MPI_REQUEST_NULL &&
                std::find(keptTickets.begin(), keptTickets.end(), tickets_[i]) == keptTickets.end() &&
                std::find(done.begin(), done.end(), tickets_[i]) == done.end())
                done.push_back(tickets_[i]);
        requests_ = std::move(kept);
        tickets_ = std::move(keptTickets);
        return done;
    }

    void waitSends() override {
        if (requests_.empty()) return;
        std::vector<MPI_Status> statuses(requests_.size());
        const int rc = MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), statuses.data());
        const int count = static_cast<int>(requests_.size());
        // After an error some requests may still be pending (MPI_ERR_PENDING):
        // keep those, so that they are completed before the transport goes.
        std::vector<MPI_Request> kept;
        std::vector<std::uint64_t> keptTickets;
        for (std::size_t i = 0; i < requests_.size(); ++i)
            if (requests_[i] != MPI_REQUEST_NULL) {
                kept.push_back(requests_[i]);
                keptTickets.push_back(tickets_[i]);
            }
        requests_ = std::move(kept);
        tickets_ = std::move(keptTickets);
        checkStatuses(rc, statuses, count, "MPI_Waitall");
    }

    bool deviceMemory() const override { return false; }

    void allReduceSum(float* data, std::size_t count) override {
        const std::size_t piece = kPiece / sizeof(float);
        for (std::size_t off = 0; off < count; off += piece) {
            const int n = static_cast<int>(std::min(piece, count - off));
            KILN_MPI(MPI_Allreduce(MPI_IN_PLACE, data + off, n, MPI_FLOAT, MPI_SUM, comm_));
        }
    }

    void interrupt() override {
        if (ulfmActive()) revoke(comm_);
    }

private:
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

    static constexpr int kTag = 7;
    MPI_Comm comm_ = MPI_COMM_NULL;
    std::vector<MPI_Request> requests_;
    std::vector<std::uint64_t> tickets_;  // of each request
    std::uint64_t nextTicket_ = 1;
    int rank_ = 0;
    int size_ = 1;
};

}  // namespace

std::unique_ptr<Transport> makeMpiTransport(MPI_Comm comm) { return std::make_unique<MpiTransport>(comm); }

}  // namespace kiln::comm
