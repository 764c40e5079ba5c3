/* A guard against a crash inside Open MPI 5.0.x (issue 37, item 6; the report in perf/RESULTS.md).
 *
 * A communicator being created (MPIX_Comm_shrink, dup, split ...) is listed among the process's communicators
 * before its collectives are selected: its c_coll is NULL until ompi_comm_activate completes. A second process
 * failure noticed inside that activation's progress loop walks every communicator and calls
 * ompi_comm_revoke_local on it, which calls comm->c_coll->coll_revoke_local: a read at address 0x450 (the
 * offset of coll_revoke_local), and a healthy process dies. kiln defines ompi_comm_revoke_local itself
 * (libmpi calls it through its PLT) and, for a communicator without collectives yet, lends it a table whose
 * coll_revoke_local does nothing while Open MPI's own function runs; everything else is Open MPI's.
 *
 * C, so that the reproducer in perf/ links the same guard. */
#ifndef KILN_COMM_REVOKE_GUARD_H
#define KILN_COMM_REVOKE_GUARD_H

#ifdef __cplusplus
extern "C" {
#endif

/* After MPI_Init: finds where Open MPI keeps a communicator's collectives (by looking at MPI_COMM_WORLD's) and
 * arms the guard. Returns 1 when armed; 0 when it is not needed or not safe (another MPI, another Open MPI
 * than 5.0, a layout it does not recognise), and then writes why into `why` (`size` bytes). */
int kiln_arm_revoke_guard(char* why, int size);

/* How many times the guard lent its table (a crash it prevented each time). */
long kiln_revoke_guard_saves(void);

/* Where it found a communicator's collectives (bytes into it), -1 when not armed: for its test. */
long kiln_revoke_guard_offset(void);

#ifdef __cplusplus
}
#endif

#endif
