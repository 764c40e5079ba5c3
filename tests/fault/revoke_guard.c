/* kiln's guard against Open MPI 5.0's crash in ompi_comm_revoke_local (src/comm/revoke_guard.c).
 * Pass criteria, all printed by one process:
 *  1. The guard arms on this Open MPI and finds a communicator's collectives at one field.
 *  2. The executable's ompi_comm_revoke_local is the one every lookup finds (libmpi's PLT binds to it).
 *  3. A communicator whose collectives are not selected yet (c_coll NULL, as while a shrink or dup is
 *     activated) is revoked locally without a crash: the guard lends its table once and gives NULL back.
 *     Without the guard this is Open MPI's segmentation fault at address 0x450.
 * Ends with "REVOKE-GUARD PASS" and status 0, or "REVOKE-GUARD FAIL: ..." and status 1. */
#define _GNU_SOURCE
#include "kiln/comm/revoke_guard.h"

#include <mpi.h>

#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>

bool ompi_comm_revoke_local(void* comm, bool collOnly);

static int fail(const char* what) {
    printf("REVOKE-GUARD FAIL: %s\n", what);
    MPI_Finalize();
    return 1;
}

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    char why[160] = {0};
    if (!kiln_arm_revoke_guard(why, (int)sizeof why)) return fail(why);
    printf("1. %s\n", why);
    if (dlsym(RTLD_DEFAULT, "ompi_comm_revoke_local") != (void*)&ompi_comm_revoke_local)
        return fail("the library's ompi_comm_revoke_local is found before kiln's: is it exported?");
    printf("2. ompi_comm_revoke_local resolves to kiln's guard\n");
    MPI_Comm comm = MPI_COMM_NULL;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    void** field = (void**)((char*)comm + kiln_revoke_guard_offset());
    void* collectives = *field;
    *field = NULL; /* as between a new communicator's listing and its collectives' selection */
    ompi_comm_revoke_local(comm, true);
    const int gaveBack = *field == NULL;
    *field = collectives;
    if (kiln_revoke_guard_saves() != 1 || !gaveBack) return fail("the guard did not lend its table once and give NULL back");
    printf("3. a communicator without collectives revoked locally: no crash, the table lent once\n");
    MPI_Comm_free(&comm);
    printf("REVOKE-GUARD PASS\n");
    MPI_Finalize();
    return 0;
}
