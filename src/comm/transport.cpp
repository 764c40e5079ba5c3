#include "kiln/comm/transport.hpp"

namespace kiln::comm {

// Where sends do not hold up receives (MPI): post the sends, then receive.
void Transport::exchange(const std::vector<Message>& sends, const std::vector<Message>& receives,
                         const std::function<void(std::size_t)>& received) {
    for (const auto& m : sends) sendAsync(m.data, m.bytes, m.peer);
    std::size_t done = 0;
    for (const auto& m : receives) {
        recv(m.data, m.bytes, m.peer);
        if (received) received(++done);
    }
    waitSends();
}

}  // namespace kiln::comm
