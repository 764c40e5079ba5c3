// The run's record changes hands as the trainer's recovery hands it over, on
// 3 ranks: rank 0 holds diag.h5 and stops writing after a step's commit but
// before its row (as a holder that dies there); rank 1 takes over, appends,
// and writes the row the holder left; then rank 2 takes over from rank 1 (a
// holder retired alive, which closes the file first: HDF5 allows one
// writer). Every row and event lands exactly once, from whoever held the file.
#include "../../src/train/run_report.hpp"

#include "kiln/comm/world.hpp"
#include "kiln/io/diag_summary.hpp"

#include <gtest/gtest.h>
#include <mpi.h>

#include <filesystem>
#include <string>

using namespace kiln;

namespace {
io::StepRecord row(std::uint64_t step) {
    io::StepRecord r;
    r.step = step;
    r.loss = 5.0 - double(step);
    return r;
}
}  // namespace

TEST(RunReport, DiagnosticsChangeHandsWithoutLosingARow) {
    comm::World world(1);
    ASSERT_EQ(world.size(), 3);
    std::filesystem::path dir = std::filesystem::temp_directory_path() / "kiln-test-run-report";
    if (world.rank() == 0) {
        std::filesystem::remove_all(dir);
        std::filesystem::create_directories(dir);
    }
    MPI_Barrier(world.control());
    train::RunReport report;
    report.describeRun(dir / "diag.h5", "[run]\nname = t\n", {"web"}, {});
    if (world.rank() == 0) report.open(false, 0, "start", "3 ranks");
    EXPECT_EQ(report.holds(), world.rank() == 0);

    report.step(row(0), {10});
    report.notice(1, "admit", "a notice on every rank, written once");
    // Step 1 commits everywhere, but its holder writes nothing more: as if it died before the row.
    const bool holderDies = world.rank() == 0;
    if (!holderDies) report.step(row(1), {20});

    // Rank 1 speaks from now on. Rank 0 is still a member here, so it closes the file as a benched
    // holder does; the row of step 1, which it never wrote, comes from rank 1.
    report.handOver(world, 1, 1);
    EXPECT_EQ(report.holder(), 1);
    EXPECT_EQ(report.holds(), world.rank() == 1);
    report.step(row(2), {30});

    // Rank 1's node retired alive: rank 2 takes over after rank 1 closed the file.
    report.handOver(world, 2, 3);
    EXPECT_EQ(report.holds(), world.rank() == 2);
    report.failure(io::FailureRecord{});
    report.handOver(world, 2, 3);  // the same speaker again: nothing changes hands
    EXPECT_EQ(report.holds(), world.rank() == 2);
    report = train::RunReport();  // closes diag.h5 on its holder
    MPI_Barrier(world.control());

    if (world.rank() == 0) {
        const io::DiagRecords records = io::readDiagRecords((dir / "diag.h5").string());
        ASSERT_EQ(records.steps.size(), 3u) << "each step's row exactly once";
        for (std::uint64_t s = 0; s < 3; ++s) EXPECT_EQ(records.steps[s].step, s);
        EXPECT_EQ(records.sourceTokens[1], (std::vector<std::uint64_t>{20})) << "the row the holder left, from its successor";
        int takeovers = 0, admits = 0;
        for (const auto& e : records.events) {
            takeovers += std::string(e.kind) == "takeover";
            admits += std::string(e.kind) == "admit";
        }
        EXPECT_EQ(takeovers, 2);
        EXPECT_EQ(admits, 1);
        EXPECT_EQ(records.failures.size(), 1u);
        std::filesystem::remove_all(dir);
    }
}
