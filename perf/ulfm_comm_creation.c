/*
 * Does Open MPI survive creating communicators while a second failure is being noticed? (kiln issue 19)
 *
 * No kiln in it: N ranks (8 in the counts below); the last dies at once; the others notice it in a
 * barrier, revoke, shrink, then create communicators for 16 rounds from the shrunk one (MPI_Comm_dup,
 * MPI_Comm_split, MPI_Comm_create_group, a barrier on each), while the second-to-last rank dies DELAY
 * microseconds after it noticed the first failure. On any error a round revokes, shrinks and starts again.
 * A run ends with "COMM-CREATION ok" from the lowest survivor, or a crash (segmentation fault inside Open
 * MPI: ompi_comm_revoke_local under ompi_comm_activate), or a hang (the timeout's 124).
 *
 *   (built as build/ulfm_comm_creation; or: mpicc perf/ulfm_comm_creation.c -o build/ulfm_comm_creation)
 *   for i in $(seq 100); do out=$(timeout 60 mpirun -n 8 --oversubscribe --with-ft ulfm \
 *       build/ulfm_comm_creation $((RANDOM % 10000)) 2>&1); rc=$?
 *     case "$rc:$out" in 0:*) echo fine;; 124:*"COMM-CREATION ok"*) echo "hang after finishing";;
 *       124:*) echo hang;; *) echo "crash (exit $rc)";; esac; done | sort | uniq -c
 *
 * Counts with the Open MPI 5.0.10 kiln ships: see perf/RESULTS.md ("Chaos campaign"). kiln's answer is to
 * create no communicator after a shrink on the CPU (docs/faults.md).
 *
 * With a second argument "shrink" (issue 37, item 6) there are no rounds: the second failure is timed into
 * the shrink itself (the only communicator kiln creates after a failure): the second-to-last rank dies DELAY
 * microseconds after the last, so that its notice arrives while the others shrink; a run ends once the shrunk
 * communicator answers a barrier. With a third argument "guard", kiln's guard (src/comm/revoke_guard.c,
 * linked in) is armed first. perf/ulfm_shrink_race.sh runs it with random delays and counts.
 */
#include <mpi.h>
#include <mpi-ext.h>

#include "kiln/comm/revoke_guard.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void release(MPI_Comm* comm) {
    if (*comm != MPI_COMM_NULL) MPI_Comm_free(comm);
}

static MPI_Comm repaired(MPI_Comm comm) {
    MPI_Comm shrunk = MPI_COMM_NULL;
    MPIX_Comm_revoke(comm);
    while (MPIX_Comm_shrink(comm, &shrunk) != MPI_SUCCESS) {}
    MPI_Comm_free(&comm);
    MPI_Comm_set_errhandler(shrunk, MPI_ERRORS_RETURN);
    return shrunk;
}

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    const int delay = argc > 1 ? atoi(argv[1]) : 1000;
    const int rounds = argc > 2 && argv[2][0] == 's' ? 0 : 16; /* "shrink": the shrink alone */
    char why[160] = "off";
    const int guarded = argc > 3 && argv[3][0] == 'g' && kiln_arm_revoke_guard(why, (int)sizeof why);
    MPI_Comm comm = MPI_COMM_NULL;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    int rank = 0, size = 0;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    if (rank == size - 1) raise(SIGKILL);
    /* "shrink": the second dies DELAY us after the first, not after noticing it (the runtime's notice of a
     * death takes milliseconds): its notice then reaches the others while they shrink for the first. */
    if (rounds == 0 && rank == size - 2) {
        usleep((useconds_t)delay);
        raise(SIGKILL);
    }
    MPI_Barrier(comm); /* fails: the first failure is noticed here */
    if (rank == size - 2) {
        usleep((useconds_t)delay);
        raise(SIGKILL);
    }
    comm = repaired(comm);
    for (int round = 0; round < rounds;) {
        MPI_Comm dup = MPI_COMM_NULL, split = MPI_COMM_NULL, group = MPI_COMM_NULL;
        MPI_Group all = MPI_GROUP_NULL;
        int me = 0, ok = 1;
        MPI_Comm_rank(comm, &me);
        ok = ok && MPI_Comm_dup(comm, &dup) == MPI_SUCCESS && MPI_Barrier(dup) == MPI_SUCCESS;
        ok = ok && MPI_Comm_split(comm, me % 2, me, &split) == MPI_SUCCESS && MPI_Barrier(split) == MPI_SUCCESS;
        ok = ok && MPI_Comm_group(comm, &all) == MPI_SUCCESS &&
             MPI_Comm_create_group(comm, all, round, &group) == MPI_SUCCESS && MPI_Barrier(group) == MPI_SUCCESS;
        if (all != MPI_GROUP_NULL) MPI_Group_free(&all);
        release(&dup);
        release(&split);
        release(&group);
        if (!ok) {
            comm = repaired(comm);
            continue;
        }
        ++round;
    }
    while (rounds == 0 && MPI_Barrier(comm) != MPI_SUCCESS) comm = repaired(comm);
    MPI_Comm_rank(comm, &rank);
    if (rank == 0) printf("COMM-CREATION ok: %d rounds after two failures (delay %d us)\n", rounds, delay);
    if (guarded && kiln_revoke_guard_saves() > 0) printf("COMM-CREATION guard: lent its table %ld time(s)\n", kiln_revoke_guard_saves());
    if (argc > 3 && !guarded && rank == 0) printf("COMM-CREATION guard not armed: %s\n", why);
    MPI_Comm_free(&comm);
    MPI_Finalize();
    return 0;
}
