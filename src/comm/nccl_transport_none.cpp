// Stand-in for nccl_transport.cpp when kiln is built without NCCL.
#include "kiln/base/error.hpp"
#include "kiln/comm/transport.hpp"

namespace kiln::comm {

std::unique_ptr<Transport> makeNcclTransport(MPI_Comm, int, std::chrono::milliseconds) {
    throw Error("this kiln was built without NCCL (configure with -DKILN_WITH_NCCL=ON on a machine with CUDA and NCCL)",
                ErrorScope::AllRanks);
}

bool ncclBuiltIn() { return false; }

bool ncclCanConnect(MPI_Comm, int, std::string& why) {
    why = "this kiln was built without NCCL";
    return false;
}
std::string ncclVersion() { return "not built in"; }

}  // namespace kiln::comm
