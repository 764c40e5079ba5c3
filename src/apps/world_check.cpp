#include "world_check.hpp"

#include "kiln/comm/mpi_check.hpp"

namespace kiln::apps {

WorldCheck checkControlCommunicator(const comm::World& world) {
    long long mine[2] = {1, world.rank()};
    long long sums[2] = {0, 0};
    KILN_MPI(MPI_Allreduce(mine, sums, 2, MPI_LONG_LONG, MPI_SUM, world.control()));
    const long long n = world.size();
    return {sums[0], sums[1], n * (n - 1) / 2};
}

}  // namespace kiln::apps
