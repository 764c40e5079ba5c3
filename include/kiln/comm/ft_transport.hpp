// Which point-to-point transport (Open MPI's PML) the job got, and whether
// Open MPI's ULFM supports it. Only ob1 (over its tcp, sm and self BTLs, or
// others that match its protocol) is fully fault tolerant; pml ucx, which a
// site with InfiniBand gets by default, is not meant for production under
// ULFM, and pml cm is untested there. kiln asks once, after MPI_Init.
#pragma once

#include <string>

namespace kiln::comm {

struct TransportReport {
    std::string pml;         // "ob1", "ucx", "cm", or "unknown" (not Open MPI, or a layout kiln does not know)
    bool faultTolerant;      // ULFM supports it in production
    std::string advice;      // what to do when it is not ("" when it is)
};

TransportReport faultTolerantTransport();

}  // namespace kiln::comm
