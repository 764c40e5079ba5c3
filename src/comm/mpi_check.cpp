#include "kiln/comm/mpi_check.hpp"

#include "kiln/base/error.hpp"
#include "kiln/base/log.hpp"
#include "kiln/comm/ulfm.hpp"

#include <fmt/format.h>

namespace kiln::comm {

bool isProcessFailure(int errorClass) {
#if KILN_HAVE_ULFM
    return errorClass == MPIX_ERR_PROC_FAILED || errorClass == MPIX_ERR_PROC_FAILED_PENDING ||
           errorClass == MPIX_ERR_REVOKED;
#else
    (void)errorClass;
    return false;
#endif
}

void checkMpi(int rc, const char* call, const char* file, int line) {
    if (rc == MPI_SUCCESS) return;
    int errorClass = rc;
    MPI_Error_class(rc, &errorClass);
    char text[MPI_MAX_ERROR_STRING] = {};
    int length = 0;
    MPI_Error_string(rc, text, &length);
    std::string message = fmt::format("{} failed on rank {} ({}) at {}:{}: {}", call, log::rank(), log::host(), file, line,
                                      std::string(text, static_cast<std::size_t>(length)));
    if (isProcessFailure(errorClass)) throw ProcFailedError(std::move(message), errorClass);
    throw MpiError(std::move(message), errorClass);
}

}  // namespace kiln::comm
