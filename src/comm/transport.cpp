#include "kiln/comm/transport.hpp"

namespace kiln::comm {

// Where sends do not hold up receives (MPI): post the sends, then receive.
void Transport::exchange(const std::vector<Message>& sends, const std::vector<Message>& receives) {
    for (const auto& m : sends) sendAsync(m.data, m.bytes, m.peer);
    for (const auto& m : receives) recv(m.data, m.bytes, m.peer);
    waitSends();
}

}  // namespace kiln::comm
