// A pipeline's point-to-point traffic over one channel per neighbour and
// direction. NCCL runs the operations of one communicator in the order they
// were issued, whatever the stream, and a send may wait for its receive: on
// one communicator, 1F1B's "send an activation forward, then receive a
// gradient back" on one stage meets "send a gradient back, then receive the
// next activation" on the next, and both wait for ever once messages exceed
// NCCL's buffers. A channel that carries one direction between two ranks is
// a queue matched in order, so nothing waits on a later operation. (MPI has
// no such ordering: CPU runs keep one communicator.)
#pragma once

#include "kiln/comm/transport.hpp"

#include <functional>

namespace kiln::comm {

// Makes the transport of a 2-rank communicator (rank 0 sends, rank 1 receives).
using PairTransportFactory = std::function<std::unique_ptr<Transport>(MPI_Comm pair)>;

// Collective over the ranks of `comm` that name each other in `peers` (a
// rank's neighbouring stages; every peer must name this rank back): builds
// two channels per peer. Sends and receives name peers by their rank in
// `comm`; sums are not offered (gradient sums have their own communicators).
std::unique_ptr<Transport> makeLinkTransport(MPI_Comm comm, std::vector<int> peers, const PairTransportFactory& pair);

}  // namespace kiln::comm
