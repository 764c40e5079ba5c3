#include "kiln/comm/mpi_check.hpp"
#include "kiln/comm/transport.hpp"
#include "kiln/comm/ulfm.hpp"

#include <algorithm>

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
    ~MpiTransport() override { MPI_Comm_free(&comm_); }

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
    static constexpr int kTag = 7;
    MPI_Comm comm_ = MPI_COMM_NULL;
    int rank_ = 0;
    int size_ = 1;
};

}  // namespace

std::unique_ptr<Transport> makeMpiTransport(MPI_Comm comm) { return std::make_unique<MpiTransport>(comm); }

}  // namespace kiln::comm
