#include "kiln/base/error.hpp"

#include <atomic>

namespace kiln {
namespace {
std::atomic<bool> localIsFailure{false};
}  // namespace

void setLocalErrorsAreFailures(bool recoverable) { localIsFailure = recoverable; }
bool localErrorsAreFailures() { return localIsFailure; }

}  // namespace kiln
