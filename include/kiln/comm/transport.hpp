// Tensor transport between ranks of one communicator: MPI (host memory, CPU
// runs) or NCCL (device memory, GPU runs) behind one interface. Pipelines send
// activations through it; replicas all-reduce gradients through it.
#pragma once

#include "kiln/comm/deadline.hpp"

#include <mpi.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace kiln::comm {

class Transport {
public:
    virtual ~Transport() = default;
    virtual std::string name() const = 0;
    virtual int rank() const = 0;
    virtual int size() const = 0;
    // Blocking point-to-point of `bytes` bytes; buffers live where the transport expects.
    virtual void send(const void* data, std::size_t bytes, int peer) = 0;
    virtual void recv(void* data, std::size_t bytes, int peer) = 0;
    // Non-blocking send: `data` must stay valid until the ticket it returns is
    // among completedSends() or waitSends() returned. Pipelines send this way
    // (a 1F1B schedule with blocking sends deadlocks once messages are large).
    virtual std::uint64_t sendAsync(const void* data, std::size_t bytes, int peer) = 0;
    // Tickets of sends that finished since the last call; never blocks.
    virtual std::vector<std::uint64_t> completedSends() = 0;
    // Blocks until every posted send finished.
    virtual void waitSends() = 0;
    // Whether buffers live in device memory (NCCL) or host memory (MPI).
    virtual bool deviceMemory() const = 0;
    // Every send and receive at once (each send matched by a receive on its
    // peer), in any pattern, e.g. two ranks sending to each other: none
    // waits for another (NCCL: one group, since NCCL runs a communicator's
    // operations in issue order). Returns when all are done. `received`,
    // when given, runs after each receive completes with how many have (MPI:
    // one by one, in order; NCCL: all at once, after the group).
    struct Message {
        void* data;
        std::size_t bytes;
        int peer;
    };
    virtual void exchange(const std::vector<Message>& sends, const std::vector<Message>& receives,
                          const std::function<void(std::size_t)>& received = {});
    // In-place sum over all ranks of `count` floats.
    virtual void allReduceSum(float* data, std::size_t count) = 0;
    // Starts the in-place sums of several buffers (one bucket: NCCL sums them
    // in one grouped launch, without copying them together); they must stay
    // valid and unwritten until waitAllReduces() returns. Every rank starts
    // the same sums in the same order. NCCL queues them behind the compute so
    // far and returns; MPI sums before returning (Open MPI progresses
    // non-blocking collectives only inside MPI calls, and on a CPU run the
    // cores that would overlap are computing).
    struct Floats {
        float* data;
        std::size_t count;
    };
    virtual void allReduceSumAsync(const std::vector<Floats>& buffers) = 0;
    // Blocks until every started sum finished.
    virtual void waitAllReduces() = 0;
    // After a failure: make every pending and future operation of every rank
    // on this transport return an error instead of waiting (ULFM revoke, NCCL abort).
    virtual void interrupt() = 0;
};

// Host-memory transport over a duplicate of `comm` (errors return, never
// abort). Its waits have a deadline (deadline.hpp): a CommunicationTimeout
// names the transport (`label`), the peers and what was waited for.
std::unique_ptr<Transport> makeMpiTransport(MPI_Comm comm);
// Host-memory transport among the ranks `group` of `comm` (group rank i is
// rank group[i] of `comm`), on `comm` itself with messages tagged `tag`: it
// creates no communicator, so it can be made right after a failure, where
// Open MPI's communicator creation is not safe (see docs/faults.md), and a
// revoke of `comm` interrupts it (its interrupt() does nothing: `comm`, which
// a recovery may free before the transport goes, is its owner's to revoke).
// Sums go round a ring of point-to-point messages. Transports sharing `comm`
// need different tags.
// `label` says what the transport carries ("gradient sums of layers 2-3"),
// for a CommunicationTimeout's message.
std::unique_ptr<Transport> makeMpiGroupTransport(MPI_Comm comm, std::vector<int> group, int tag,
                                                 std::string label = "");

// Device-memory transport over NCCL on CUDA device `device`. Every wait is
// polled against `deadline`; a peer that never answers becomes an error, not
// a hang. Throws when kiln was built without NCCL.
std::unique_ptr<Transport> makeNcclTransport(MPI_Comm comm, int device, std::chrono::milliseconds deadline);

bool ncclBuiltIn();
// Whether NCCL can connect the ranks of `comm`: every rank drives a CUDA
// device (`device`; -1: none) that no other rank drives, told apart by host
// and PCI bus, so that a launcher showing each rank only its own GPU passes
// (NCCL refuses two ranks of a communicator on one GPU). Collective over
// `comm` where NCCL is built in; false otherwise. `why` says what stood in
// the way.
bool ncclCanConnect(MPI_Comm comm, int device, std::string& why);
// "2.28.3", or "not built in".
std::string ncclVersion();

}  // namespace kiln::comm
