/* Can a ULFM job admit new processes after a failure, with the Open MPI kiln ships?
 * Open MPI issues #12585 and #13325 report MPI_Comm_spawn failing with ULFM on; this is the
 * smallest program that answers the question for the library at hand (plain MPI, no kiln).
 *
 * Pass criterion: 4 ranks; rank 3 SIGKILLs itself; the survivors see the failure in a barrier,
 * revoke, shrink to 3, spawn 1 process from the shrunk communicator, merge the intercommunicator,
 * and an all-reduce over the merge counts 4. Every process prints "SPAWN-AFTER-FAILURE ok"; rank 0
 * of the merge prints "SPAWN-AFTER-FAILURE PASS: merged=4 sum=4". Any failure prints what failed.
 * MPI_Finalize after a process failure may never return (Open MPI #9434; seen here in 4 runs of 34,
 * after everything above had passed): the survivors wait in the PMIx fence that opens MPI_Finalize,
 * over a namespace that holds the dead process, and the spawned one waits for them to disconnect.
 * As kiln does (comm/world.cpp), the fence is skipped (Open MPI's async_mpi_finalize): with ULFM on,
 * MPI_Finalize first flushes all traffic with a barrier over the survivors, which is the fence's
 * purpose. A watchdog still ends a process 10 s into MPI_Finalize, and says so.
 *
 *   mpicc tests/fault/spawn_after_failure.c -o spawn && mpirun -n 4 --with-ft ulfm ./spawn
 */
#include <mpi.h>
#include <mpi-ext.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void finalizeHung(int signal) {
    (void)signal;
    static const char text[] = "SPAWN-AFTER-FAILURE note: MPI_Finalize did not return within 10 s; exiting\n";
    ssize_t written = write(STDOUT_FILENO, text, sizeof text - 1);
    (void)written;
    _exit(0);
}

static int report(const char* what, int rc) {
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    MPI_Error_string(rc, text, &length);
    printf("SPAWN-AFTER-FAILURE FAIL: %s: %s\n", what, text);
    fflush(stdout);
    return 1;
}

int main(int argc, char** argv) {
    setenv("OMPI_MCA_async_mpi_finalize", "1", 0);
    MPI_Init(&argc, &argv);
    MPI_Comm parent, merged;
    MPI_Comm_get_parent(&parent);
    if (parent != MPI_COMM_NULL) {
        if (MPI_Intercomm_merge(parent, 1, &merged) != MPI_SUCCESS) return report("merge (spawned side)", 1);
    } else {
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        int rank = 0;
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        if (rank == 3) raise(SIGKILL);
        if (MPI_Barrier(MPI_COMM_WORLD) == MPI_SUCCESS) return report("the barrier did not see the failure", MPI_ERR_OTHER);
        MPIX_Comm_revoke(MPI_COMM_WORLD);
        MPI_Comm shrunk, child;
        int rc = MPIX_Comm_shrink(MPI_COMM_WORLD, &shrunk);
        if (rc != MPI_SUCCESS) return report("shrink", rc);
        MPI_Comm_set_errhandler(shrunk, MPI_ERRORS_RETURN);
        int error = MPI_SUCCESS;
        rc = MPI_Comm_spawn(argv[0], MPI_ARGV_NULL, 1, MPI_INFO_NULL, 0, shrunk, &child, &error);
        if (rc != MPI_SUCCESS) return report("spawn after the failure", rc);
        rc = MPI_Intercomm_merge(child, 0, &merged);
        if (rc != MPI_SUCCESS) return report("merge", rc);
    }
    int me = 0, size = 0, sum = 0, one = 1;
    MPI_Comm_rank(merged, &me);
    MPI_Comm_size(merged, &size);
    int rc = MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, merged);
    if (rc != MPI_SUCCESS) return report("all-reduce over the merge", rc);
    printf("SPAWN-AFTER-FAILURE ok: %s, rank %d of %d\n", parent != MPI_COMM_NULL ? "spawned" : "survivor", me, size);
    if (me == 0 && size == 4 && sum == 4) printf("SPAWN-AFTER-FAILURE PASS: merged=%d sum=%d\n", size, sum);
    fflush(stdout);
    signal(SIGALRM, finalizeHung);
    alarm(10);
    MPI_Finalize();
    return 0;
}
