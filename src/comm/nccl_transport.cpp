// NCCL transport. Built only when CMake found NCCL and CUDA (KILN_HAVE_NCCL);
// nccl_transport_none.cpp stands in otherwise.
#include "kiln/base/error.hpp"
#include "kiln/base/log.hpp"
#include "kiln/comm/heartbeat.hpp"
#include "kiln/comm/mpi_check.hpp"
#include "kiln/comm/transport.hpp"

#include <cuda_runtime.h>
#include <fmt/format.h>
#include <nccl.h>

#include <thread>
#include <utility>
#include <vector>

namespace kiln::comm {
namespace {

void checkCuda(cudaError_t rc, const char* call, const char* file, int line) {
    if (rc == cudaSuccess) return;
    throw LibraryError(fmt::format("{} failed on rank {} ({}) at {}:{}: {}", call, log::rank(), log::host(), file, line,
                                   cudaGetErrorString(rc)));
}

// A bad argument is kiln's bug; anything else (a peer that died, a network
// error, an aborted communicator) is to the trainer what a process failure
// is under ULFM: the same exception, so recovery handles both alike.
void checkNccl(ncclResult_t rc, const char* call, const char* file, int line) {
    if (rc == ncclSuccess || rc == ncclInProgress) return;
    const auto message = fmt::format("{} failed on rank {} ({}) at {}:{}: {}", call, log::rank(), log::host(), file, line,
                                     ncclGetErrorString(rc));
    if (rc == ncclInvalidArgument || rc == ncclInvalidUsage) throw LibraryError(message);
    throw ProcFailedError(message, 0);
}

#define KILN_CUDA(call) checkCuda((call), #call, __FILE__, __LINE__)
#define KILN_NCCL(call) checkNccl((call), #call, __FILE__, __LINE__)

class NcclTransport final : public Transport {
public:
    NcclTransport(MPI_Comm comm, int device, std::chrono::milliseconds deadline) : deadline_(deadline) {
        KILN_MPI(MPI_Comm_rank(comm, &rank_));
        KILN_MPI(MPI_Comm_size(comm, &size_));
        KILN_CUDA(cudaSetDevice(device));
        ncclUniqueId id;
        if (rank_ == 0) KILN_NCCL(ncclGetUniqueId(&id));
        KILN_MPI(MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, comm));
        // Non-blocking: a peer that dies during creation must not hold the
        // others inside ncclCommInitRank forever (settle() has the deadline).
        ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
        config.blocking = 0;
        KILN_NCCL(ncclCommInitRankConfig(&comm_, size_, id, rank_, &config));
        settle("communicator creation");
        KILN_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
        KILN_CUDA(cudaStreamCreateWithFlags(&sendStream_, cudaStreamNonBlocking));
        KILN_CUDA(cudaEventCreateWithFlags(&computed_, cudaEventDisableTiming));
    }

    ~NcclTransport() override {
        // A healthy communicator is destroyed; one that saw an error is
        // aborted (destroying it would wait for peers that may be gone).
        if (comm_) failed_ ? ncclCommAbort(comm_) : ncclCommDestroy(comm_);
        for (auto& [ticket, event] : pending_) cudaEventDestroy(event);
        if (computed_) cudaEventDestroy(computed_);
        if (sendStream_) cudaStreamDestroy(sendStream_);
        if (stream_) cudaStreamDestroy(stream_);
    }

    std::string name() const override { return "nccl"; }
    int rank() const override { return rank_; }
    int size() const override { return size_; }

    void send(const void* data, std::size_t bytes, int peer) override {
        afterCompute(stream_);
        enqueue(ncclSend(data, bytes, ncclChar, peer, live(), stream_), "ncclSend");
        waitOrAbort("send");
    }

    void recv(void* data, std::size_t bytes, int peer) override {
        afterCompute(stream_);  // the buffer may have been allocated or written by queued work
        enqueue(ncclRecv(data, bytes, ncclChar, peer, live(), stream_), "ncclRecv");
        waitOrAbort("recv");
    }

    // Sends go on their own stream, so that a receive posted after them on the
    // main stream is not queued behind a send whose peer is not ready yet.
    std::uint64_t sendAsync(const void* data, std::size_t bytes, int peer) override {
        afterCompute(sendStream_);
        enqueue(ncclSend(data, bytes, ncclChar, peer, live(), sendStream_), "ncclSend");
        cudaEvent_t done = nullptr;
        KILN_CUDA(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
        KILN_CUDA(cudaEventRecord(done, sendStream_));
        pending_.emplace_back(nextTicket_, done);
        return nextTicket_++;
    }

    std::vector<std::uint64_t> completedSends() override {
        std::vector<std::uint64_t> done;
        std::vector<std::pair<std::uint64_t, cudaEvent_t>> still;
        for (auto& [ticket, event] : pending_) {
            const cudaError_t state = cudaEventQuery(event);
            if (state == cudaSuccess) {
                done.push_back(ticket);
                cudaEventDestroy(event);
            } else if (state == cudaErrorNotReady) {
                still.emplace_back(ticket, event);
            } else {
                KILN_CUDA(state);
            }
        }
        pending_ = std::move(still);
        return done;
    }

    void waitSends() override {
        waitOrAbort("send", sendStream_);
        for (auto& [ticket, event] : pending_) cudaEventDestroy(event);
        pending_.clear();
    }

    bool deviceMemory() const override { return true; }

    void exchange(const std::vector<Message>& sends, const std::vector<Message>& receives,
                  const std::function<void(std::size_t)>& received) override {
        afterCompute(stream_);
        ncclComm_t comm = live();
        enqueue(ncclGroupStart(), "ncclGroupStart");
        ncclResult_t failed = ncclSuccess;
        for (const auto& m : sends) {
            const ncclResult_t rc = ncclSend(m.data, m.bytes, ncclChar, m.peer, comm, stream_);
            if (rc != ncclSuccess && rc != ncclInProgress) {
                failed = rc;
                break;
            }
        }
        for (const auto& m : receives) {
            if (failed != ncclSuccess) break;
            const ncclResult_t rc = ncclRecv(m.data, m.bytes, ncclChar, m.peer, comm, stream_);
            if (rc != ncclSuccess && rc != ncclInProgress) failed = rc;
        }
        const ncclResult_t ended = ncclGroupEnd();  // a started group is always ended
        enqueue(failed != ncclSuccess ? failed : ended, "ncclSend/ncclRecv (grouped)");
        waitOrAbort("exchange");
        if (received && !receives.empty()) received(receives.size());
    }

    void allReduceSum(float* data, std::size_t count) override {
        allReduceSumAsync({{data, count}});
        waitAllReduces();
    }

    void allReduceSumAsync(const std::vector<Floats>& buffers) override {
        afterCompute(stream_);
        ncclComm_t comm = live();
        // One group: NCCL launches the bucket's sums together, in place.
        enqueue(ncclGroupStart(), "ncclGroupStart");
        ncclResult_t failed = ncclSuccess;
        for (const auto& b : buffers) {
            const ncclResult_t rc = ncclAllReduce(b.data, b.data, b.count, ncclFloat, ncclSum, comm, stream_);
            if (rc != ncclSuccess && rc != ncclInProgress) {
                failed = rc;
                break;
            }
        }
        const ncclResult_t ended = ncclGroupEnd();  // a started group is always ended
        enqueue(failed != ncclSuccess ? failed : ended, "ncclAllReduce (grouped)");
    }

    void waitAllReduces() override { waitOrAbort("all-reduce"); }

    void interrupt() override {
        failed_ = true;
        if (comm_) ncclCommAbort(comm_);
        comm_ = nullptr;
    }

private:
    // The transport's streams do not synchronise with libtorch's (the legacy
    // default stream, on which kiln computes): without this, a send could read
    // an activation or a gradient bucket before the kernels writing it ran.
    void afterCompute(cudaStream_t stream) {
        KILN_CUDA(cudaEventRecord(computed_, cudaStreamLegacy));
        KILN_CUDA(cudaStreamWaitEvent(stream, computed_, 0));
    }

    ncclComm_t live() {
        if (!comm_) throw ProcFailedError(fmt::format("NCCL communicator of rank {} ({}) was aborted after a failure",
                                                      rank_, log::host()), 0);
        return comm_;
    }

    [[noreturn]] void abortAndThrow(const std::string& what) {
        failed_ = true;
        ncclCommAbort(comm_);
        comm_ = nullptr;
        throw ProcFailedError(what, 0);
    }

    // An operation on a non-blocking communicator may still be being queued
    // when the call returns (ncclInProgress): nothing else may be issued on
    // the communicator until it is.
    void enqueue(ncclResult_t rc, const char* call) {
        try {
            checkNccl(rc, call, __FILE__, __LINE__);
        } catch (const ProcFailedError&) {
            failed_ = true;
            throw;
        }
        if (rc == ncclInProgress) settle(call);
    }

    // Polls the communicator until nothing is in progress, within the deadline.
    void settle(const char* what) {
        const auto start = std::chrono::steady_clock::now();
        for (;;) {
            ncclResult_t state = ncclSuccess;
            const ncclResult_t rc = ncclCommGetAsyncError(comm_, &state);
            if (rc != ncclSuccess) state = rc;
            if (state == ncclSuccess) return;
            trainingThreadAlive();
            if (state != ncclInProgress)
                abortAndThrow(fmt::format("NCCL {} on rank {} ({}): {}", what, rank_, log::host(), ncclGetErrorString(state)));
            if (std::chrono::steady_clock::now() - start > deadline_)
                abortAndThrow(fmt::format("NCCL {} on rank {} ({}) did not finish within {} ms; communicator aborted", what,
                                          rank_, log::host(), deadline_.count()));
            std::this_thread::sleep_for(std::chrono::microseconds(200));
        }
    }

    // NCCL never returns on a dead peer: poll the stream and the communicator's
    // asynchronous error, and abort the communicator once the deadline passes,
    // so the failure surfaces as an error that fault handling can act on.
    void waitOrAbort(const char* what) { waitOrAbort(what, stream_); }
    void waitOrAbort(const char* what, cudaStream_t stream) {
        const auto start = std::chrono::steady_clock::now();
        for (;;) {
            const cudaError_t state = cudaStreamQuery(stream);
            if (state == cudaSuccess) return;
            if (state != cudaErrorNotReady) KILN_CUDA(state);
            trainingThreadAlive();  // polling, not stuck: a stuck peer is found by its own silence
            if (!comm_) live();  // aborted by interrupt() from another thread of control
            ncclResult_t async = ncclSuccess;
            const ncclResult_t rc = ncclCommGetAsyncError(comm_, &async);
            if (rc != ncclSuccess) async = rc;
            if (async != ncclSuccess && async != ncclInProgress)
                abortAndThrow(fmt::format("NCCL {} on rank {} ({}): {}", what, rank_, log::host(), ncclGetErrorString(async)));
            if (std::chrono::steady_clock::now() - start > deadline_)
                abortAndThrow(fmt::format("NCCL {} on rank {} ({}) did not finish within {} ms; communicator aborted",
                                          what, rank_, log::host(), deadline_.count()));
            // Sleep rather than spin: a waiting rank must not take a core from the others.
            std::this_thread::sleep_for(std::chrono::microseconds(50));
        }
    }

    ncclComm_t comm_ = nullptr;
    cudaStream_t stream_ = nullptr, sendStream_ = nullptr;
    cudaEvent_t computed_ = nullptr;  // the compute stream's work so far, for afterCompute()
    std::vector<std::pair<std::uint64_t, cudaEvent_t>> pending_;
    std::uint64_t nextTicket_ = 1;
    std::chrono::milliseconds deadline_;  // for every wait, creation included
    int rank_ = 0;
    int size_ = 1;
    bool failed_ = false;  // an error was seen: abort, never destroy
};

}  // namespace

std::unique_ptr<Transport> makeNcclTransport(MPI_Comm comm, int device, std::chrono::milliseconds deadline) {
    return std::make_unique<NcclTransport>(comm, device, deadline);
}

bool ncclBuiltIn() { return true; }

bool ncclCanConnect(MPI_Comm comm, int device, std::string& why) {
    // "host bus-id" of this rank's GPU, or "" for none, in fixed-size records.
    constexpr int kRecord = 128;
    char record[kRecord] = {};
    if (device >= 0) {
        char bus[64] = {};
        KILN_CUDA(cudaDeviceGetPCIBusId(bus, sizeof(bus), device));
        fmt::format_to_n(record, kRecord - 1, "{} {}", log::host(), bus);
    }
    int size = 0;
    KILN_MPI(MPI_Comm_size(comm, &size));
    std::vector<char> all(static_cast<std::size_t>(size) * kRecord);
    KILN_MPI(MPI_Allgather(record, kRecord, MPI_CHAR, all.data(), kRecord, MPI_CHAR, comm));
    const auto of = [&](int r) { return std::string(all.data() + static_cast<std::size_t>(r) * kRecord); };
    for (int r = 0; r < size; ++r) {
        if (of(r).empty()) {
            why = fmt::format("rank {} has no GPU", r);
            return false;
        }
        for (int q = 0; q < r; ++q)
            if (of(q) == of(r)) {
                why = fmt::format("ranks {} and {} share the GPU at {} (more ranks than GPUs on that node)", q, r, of(r));
                return false;
            }
    }
    return true;
}

std::string ncclVersion() {
    int code = 0;
    if (ncclGetVersion(&code) != ncclSuccess) return "unknown";
    // NCCL >= 2.9 encodes major*10000 + minor*100 + patch.
    return fmt::format("{}.{}.{}", code / 10000, (code / 100) % 100, code % 100);
}

}  // namespace kiln::comm
