// Typed errors. Every failure kiln reports is one of these, so `main` can
// decide how to report it: an error every rank sees the same way (a bad deck)
// is printed once; an error of one rank (a bad shard it read, an MPI failure)
// is printed by that rank with its rank and host.
#pragma once

#include <stdexcept>
#include <string>

namespace kiln {

// Who raised the error: all ranks identically, or this rank alone.
enum class ErrorScope { AllRanks, ThisRank };

class Error : public std::runtime_error {
public:
    Error(std::string message, ErrorScope scope) : std::runtime_error(std::move(message)), scope_(scope) {}
    ErrorScope scope() const { return scope_; }

private:
    ErrorScope scope_;
};

// Bad user input: a deck, a command line, a data file. Seen by all ranks alike.
class InputError : public Error {
public:
    explicit InputError(std::string message, ErrorScope scope = ErrorScope::AllRanks)
        : Error(std::move(message), scope) {}
};

// A failed MPI call; `errorClass` is the MPI error class.
class MpiError : public Error {
public:
    MpiError(std::string message, int errorClass)
        : Error(std::move(message), ErrorScope::ThisRank), errorClass_(errorClass) {}
    int errorClass() const { return errorClass_; }

private:
    int errorClass_;
};

// A peer process failed or the communicator was revoked (ULFM): recoverable.
class ProcFailedError : public MpiError {
public:
    using MpiError::MpiError;
};

// A failed call of another C library (HDF5, NCCL, CUDA, SentencePiece).
class LibraryError : public Error {
public:
    explicit LibraryError(std::string message) : Error(std::move(message), ErrorScope::ThisRank) {}
};

// While kiln run trains under ULFM, an error of one process (an exception
// from libtorch, out of memory, a local file) ends that process alone: the
// others see a failed peer and recover. Elsewhere (start-up, no ULFM) such an
// error aborts the job, since nobody would recover.
void setLocalErrorsAreFailures(bool recoverable);
bool localErrorsAreFailures();

}  // namespace kiln
