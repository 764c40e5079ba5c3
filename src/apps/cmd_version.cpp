#include "kiln/comm/transport.hpp"
#include "kiln/comm/ulfm.hpp"
#include "kiln/comm/world.hpp"
#include "subcommands.hpp"
#include "versions.hpp"

#include <fmt/format.h>

namespace kiln::apps {

int versionMain(int, char**) {
    fmt::print("kiln {}\n", kilnVersion());
    fmt::print("  MPI       {}\n", comm::mpiLibraryVersion());
    fmt::print("  ULFM      {}\n", comm::ulfmCompiled() ? "built in (enable at launch: mpirun --with-ft ulfm)"
                                                          : "not available in this MPI");
    fmt::print("  HDF5      {}\n", hdf5Version());
    fmt::print("  libtorch  {}\n", torchVersion());
    fmt::print("  NCCL      {}\n", comm::ncclVersion());
    return 0;
}

}  // namespace kiln::apps
