/* See include/kiln/comm/revoke_guard.h. */
#define _GNU_SOURCE
#include "kiln/comm/revoke_guard.h"

#include <mpi.h>

#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

/* mca_coll_base_comm_coll_t in Open MPI 5.0.x: 141 function and module pointers, coll_revoke_local the 139th
 * (index 138, byte offset 0x450: the address of the crash). Checked at arming time against MPI_COMM_WORLD's. */
enum { kRevokeSlot = 138, kCollSlots = 141, kScanBytes = 2048 };

typedef bool (*RevokeLocal)(void* comm, bool collOnly);

bool ompi_comm_revoke_local(void* comm, bool collOnly);

static RevokeLocal real_revoke_local = NULL;
static long c_coll_offset = -1; /* bytes into ompi_communicator_t; -1: not armed */
static void* lent_table[kCollSlots];
static long saves = 0;

static int do_nothing(void* comm) {
    (void)comm;
    return MPI_SUCCESS;
}

/* Reads `n` bytes at `from` without faulting on a bad address (EFAULT instead). */
static int read_safely(const void* from, void* into, size_t n) {
    struct iovec local = {into, n}, remote = {(void*)from, n};
    return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == (ssize_t)n;
}

int kiln_arm_revoke_guard(char* why, int size) {
    char version[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
    int length = 0;
    MPI_Get_library_version(version, &length);
    if (strstr(version, "Open MPI v5.0.") == NULL) {
        snprintf(why, (size_t)size, "not needed: %.60s", version);
        return 0;
    }
    real_revoke_local = (RevokeLocal)dlsym(RTLD_NEXT, "ompi_comm_revoke_local");
    void* base_revoke = dlsym(RTLD_DEFAULT, "mca_coll_base_revoke_local");
    void* han_revoke = dlsym(RTLD_DEFAULT, "mca_coll_han_revoke_local");
    if (real_revoke_local == NULL || (void*)real_revoke_local == (void*)&ompi_comm_revoke_local || base_revoke == NULL) {
        snprintf(why, (size_t)size, "Open MPI's ompi_comm_revoke_local or mca_coll_base_revoke_local not found");
        return 0;
    }
    /* The field of MPI_COMM_WORLD that points at a table whose revoke slot is Open MPI's: exactly one. */
    const char* world = (const char*)MPI_COMM_WORLD;
    long found = -1;
    int matches = 0;
    for (long offset = 0; offset + (long)sizeof(void*) <= kScanBytes; offset += (long)sizeof(void*)) {
        void* table = NULL;
        void* slot = NULL;
        if (!read_safely(world + offset, &table, sizeof table) || table == NULL) continue;
        if (!read_safely((char*)table + kRevokeSlot * sizeof(void*), &slot, sizeof slot)) continue;
        if (slot == base_revoke || (han_revoke != NULL && slot == han_revoke)) {
            found = offset;
            ++matches;
        }
    }
    if (matches != 1) {
        snprintf(why, (size_t)size, "its communicator layout is not the one known (%d candidate fields)", matches);
        return 0;
    }
    memset(lent_table, 0, sizeof lent_table);
    lent_table[kRevokeSlot] = (void*)&do_nothing;
    __atomic_store_n(&c_coll_offset, found, __ATOMIC_RELEASE);
    snprintf(why, (size_t)size, "armed (collectives at byte %ld of a communicator)", found);
    return 1;
}

long kiln_revoke_guard_saves(void) { return __atomic_load_n(&saves, __ATOMIC_RELAXED); }

long kiln_revoke_guard_offset(void) { return __atomic_load_n(&c_coll_offset, __ATOMIC_ACQUIRE); }

/* Open MPI's own, for every communicator with its collectives; a communicator still being activated borrows
 * the do-nothing table while it runs, and gets NULL back unless its activation set its own meanwhile. */
__attribute__((visibility("default"))) bool ompi_comm_revoke_local(void* comm, bool collOnly) {
    const long offset = __atomic_load_n(&c_coll_offset, __ATOMIC_ACQUIRE);
    if (real_revoke_local == NULL) real_revoke_local = (RevokeLocal)dlsym(RTLD_NEXT, "ompi_comm_revoke_local");
    if (offset < 0 || comm == NULL) return real_revoke_local(comm, collOnly);
    void** field = (void**)((char*)comm + offset);
    void* expected = NULL;
    if (!__atomic_compare_exchange_n(field, &expected, (void*)lent_table, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return real_revoke_local(comm, collOnly);
    __atomic_add_fetch(&saves, 1, __ATOMIC_RELAXED);
    const bool revoked = real_revoke_local(comm, collOnly);
    void* lent = (void*)lent_table;
    __atomic_compare_exchange_n(field, &lent, NULL, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    return revoked;
}
