// GoogleTest main for tests run under mpirun: every rank runs every test,
// rank 0 prints the whole report, the other ranks only their failures (named
// by rank), and the exit code is failed on every rank if any rank failed.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <string>

namespace {

class FailuresOfRank final : public ::testing::EmptyTestEventListener {
public:
    explicit FailuresOfRank(int rank) : rank_(rank) {}
    // The name is kept here: asking GoogleTest for the current test while it
    // reports a result waits on its own lock.
    void OnTestStart(const ::testing::TestInfo& test) override {
        name_ = std::string(test.test_suite_name()) + "." + test.name();
    }
    void OnTestPartResult(const ::testing::TestPartResult& result) override {
        if (!result.failed()) return;
        std::fprintf(stderr, "rank %d: %s failed at %s:%d\n%s\n", rank_, name_.c_str(),
                     result.file_name() ? result.file_name() : "?", result.line_number(), result.summary());
    }

private:
    int rank_;
    std::string name_;
};

}  // namespace

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    ::testing::InitGoogleTest(&argc, argv);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank != 0) {
        auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
        delete listeners.Release(listeners.default_result_printer());
        listeners.Append(new FailuresOfRank(rank));
    }
    int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
    int anyFailed = 0;
    MPI_Allreduce(&failed, &anyFailed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (anyFailed && !failed) std::fprintf(stderr, "rank %d: passed here, but another rank failed\n", rank);
    MPI_Finalize();
    return anyFailed;
}
