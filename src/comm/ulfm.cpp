#include "kiln/comm/ulfm.hpp"

#include "kiln/base/error.hpp"
#include "kiln/comm/deadline.hpp"
#include "kiln/comm/heartbeat.hpp"
#include "kiln/comm/mpi_check.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <numeric>
#include <string>
#include <thread>

namespace kiln::comm {
namespace {

// Reads Open MPI's 'mpi_ft_enable' control variable through the MPI tool
// interface, which works whatever launcher set it (mpirun, srun, env).
bool readFtEnableCvar() {
    int provided = 0;
    if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) return false;
    bool enabled = false;
    int index = -1;
    if (MPI_T_cvar_get_index("mpi_ft_enable", &index) == MPI_SUCCESS) {
        MPI_T_cvar_handle handle;
        int count = 0;
        if (MPI_T_cvar_handle_alloc(index, nullptr, &handle, &count) == MPI_SUCCESS) {
            // Zeroed and oversized: the variable may be exposed as a C bool or an int.
            long long value[2] = {0, 0};
            if (MPI_T_cvar_read(handle, value) == MPI_SUCCESS) enabled = value[0] != 0;
            MPI_T_cvar_handle_free(&handle);
        }
    }
    MPI_T_finalize();
    return enabled;
}

#if !KILN_HAVE_ULFM
[[noreturn]] void noUlfm(const char* what) {
    throw Error(std::string(what) + ": this kiln was built against an MPI without ULFM", ErrorScope::ThisRank);
}
#endif

}  // namespace

std::vector<int> ranksMissingFrom(MPI_Comm before, MPI_Comm after) {
    MPI_Group groupBefore, groupAfter, missing;
    KILN_MPI(MPI_Comm_group(before, &groupBefore));
    KILN_MPI(MPI_Comm_group(after, &groupAfter));
    KILN_MPI(MPI_Group_difference(groupBefore, groupAfter, &missing));
    int count = 0;
    KILN_MPI(MPI_Group_size(missing, &count));
    std::vector<int> inMissing(count), inBefore(count);
    std::iota(inMissing.begin(), inMissing.end(), 0);
    KILN_MPI(MPI_Group_translate_ranks(missing, count, inMissing.data(), groupBefore, inBefore.data()));
    MPI_Group_free(&missing);
    MPI_Group_free(&groupAfter);
    MPI_Group_free(&groupBefore);
    std::sort(inBefore.begin(), inBefore.end());
    return inBefore;
}

bool awaitFailures(MPI_Comm comm, const std::vector<int>& ranks, double seconds) {
#if KILN_HAVE_ULFM
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    MPI_Group all;
    KILN_MPI(MPI_Comm_group(comm, &all));
    for (;;) {
        MPI_Group failed;
        if (MPIX_Comm_get_failed(comm, &failed) != MPI_SUCCESS) break;
        std::vector<int> inFailed(ranks.size(), MPI_UNDEFINED);
        MPI_Group_translate_ranks(all, static_cast<int>(ranks.size()), ranks.data(), failed, inFailed.data());
        MPI_Group_free(&failed);
        if (std::none_of(inFailed.begin(), inFailed.end(), [](int r) { return r == MPI_UNDEFINED; })) {
            MPI_Group_free(&all);
            return true;
        }
        if (std::chrono::steady_clock::now() >= until) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    MPI_Group_free(&all);
    return false;
#else
    (void)comm;
    (void)ranks;
    (void)seconds;
    noUlfm("awaitFailures");
#endif
}

bool ulfmCompiled() {
#if KILN_HAVE_ULFM
    return true;
#else
    return false;
#endif
}

bool ulfmActive() {
    if (!ulfmCompiled()) return false;
    static const bool active = [] {
        if (const char* env = std::getenv("OMPI_MCA_mpi_ft_enable"); env && std::string(env) != "0") return true;
        return readFtEnableCvar();
    }();
    return active;
}

#if KILN_HAVE_ULFM

void revoke(MPI_Comm comm) {
    const ProgressHere progress;
    // Revoking an already revoked communicator is harmless; its error code is not.
    const int rc = MPIX_Comm_revoke(comm);
    int errorClass = MPI_SUCCESS;
    MPI_Error_class(rc, &errorClass);
    if (rc != MPI_SUCCESS && errorClass != MPIX_ERR_REVOKED) KILN_MPI(rc);
}

MPI_Comm shrink(MPI_Comm comm) {
    MPI_Comm survivors = MPI_COMM_NULL;
    KILN_MPI(MPIX_Comm_shrink(comm, &survivors));  // KILN_MPI keeps the heartbeat pump out meanwhile
    KILN_MPI(MPI_Comm_set_errhandler(survivors, MPI_ERRORS_RETURN));
    return survivors;
}

int agree(MPI_Comm comm, int flag, bool* failureSeen) {
    // A failure of a not yet acknowledged rank is reported as an error after the
    // agreement completes; the value agreed is still valid.
    // Non-blocking and polled against the step's deadline (deadline.hpp): an
    // agreement that never completes (Open MPI #13915) ends this rank with
    // that said, instead of a job that waits forever.
    MPI_Request request = MPI_REQUEST_NULL;
    const ProgressHere progress;  // from the agreement's start, not only its wait
    int rc = MPIX_Comm_iagree(comm, &flag, &request);
    if (rc == MPI_SUCCESS)
        rc = waitWithDeadline(request, nullptr, [] { return std::string("the agreement that commits the step or a recovery (MPIX_Comm_iagree)"); });
    int errorClass = MPI_SUCCESS;
    MPI_Error_class(rc, &errorClass);
    // On a revoked communicator the agreement still completes (it is how survivors decide what to do).
    if (rc != MPI_SUCCESS && errorClass != MPIX_ERR_PROC_FAILED && errorClass != MPIX_ERR_REVOKED) KILN_MPI(rc);
    if (failureSeen) *failureSeen = rc != MPI_SUCCESS && errorClass == MPIX_ERR_PROC_FAILED;
    return flag;
}

#endif

int agreeOrThrow(MPI_Comm comm, bool ok, const char* what, int bits) {
    int flag = (ok ? 1 : 0) | (bits << 1);
    if (ulfmActive()) {
        if (!ok) revoke(comm);
        flag = agree(comm, flag);
    } else {
        KILN_MPI(MPI_Allreduce(MPI_IN_PLACE, &flag, 1, MPI_INT, MPI_BAND, comm));
    }
    if ((flag & 1) == 0) throw ProcFailedError(fmt::format("a rank failed while {}", what), 0);
    return flag >> 1;
}

#if !KILN_HAVE_ULFM

void revoke(MPI_Comm) { noUlfm("revoke"); }
MPI_Comm shrink(MPI_Comm) { noUlfm("shrink"); }
int agree(MPI_Comm, int, bool*) { noUlfm("agree"); }

#endif

}  // namespace kiln::comm
