// What agreeing on decisions costs (issue 37, item 2). Under mpirun -n N:
//   step_fingerprint   building the per-step fingerprint (step, a cursor of
//                      S sources, the layout digest): every rank, every step
//   step_allgather     the step's all-gather with the fingerprint's two
//                      doubles (9 a rank) against the baseline without (7)
//   require_agreement  a decision's check (one all-reduce of two words)
//                      against a one-int all-reduce, the cheapest collective
//   layout_fingerprint fingerprinting a layout of P pipelines (at a regroup)
// One JSON object per line; times in microseconds, medians of rounds.
#include "kiln/comm/decision_check.hpp"
#include "kiln/plan/plan_fingerprint.hpp"

#include <fmt/format.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

// Median over `rounds` of the mean microseconds of `reps` calls.
double timeIt(const std::function<void()>& work, int reps, int rounds = 9) {
    std::vector<double> us;
    for (int r = 0; r < rounds; ++r) {
        MPI_Barrier(MPI_COMM_WORLD);
        const auto t0 = Clock::now();
        for (int i = 0; i < reps; ++i) work();
        us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / reps);
    }
    std::sort(us.begin(), us.end());
    return us[us.size() / 2];
}

kiln::comm::Fingerprint stepFingerprint(std::uint64_t step, int sources) {
    kiln::comm::Fingerprint f("the step, the loader's cursor and the layout");
    f.add("step", step).add("cursor.step", step).add("cursor.samples", step * 16);
    f.add("cursor.segment_start", 0).add("cursor.weights_hash", 0x1234u);
    for (int s = 0; s < sources; ++s) {
        const std::string name = fmt::format("cursor.source{}.", s);
        f.add(name + "epoch", 0).add(name + "doc_pos", step).add(name + "token_offset", 17);
        f.add(name + "samples", step * 8).add(name + "segment_base", 0);
        f.add(name + "docs_done", step).add(name + "tokens_dropped", 0);
    }
    return f.add("layout", 0xabcdefu);
}

}  // namespace

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int rank = 0, ranks = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    const auto report = [&](const char* name, double us, double baseline, const std::string& extra) {
        if (rank == 0)
            fmt::print("{{\"bench\":\"{}\",\"ranks\":{},\"us\":{:.3f},\"baseline_us\":{:.3f},\"added_us\":{:.3f}{}}}\n", name,
                       ranks, us, baseline, us - baseline, extra);
    };

    std::uint64_t step = 0, sink = 0;
    for (int sources : {2, 16}) {
        const double us = timeIt([&] { sink += stepFingerprint(++step, sources).digest(); }, 2000);
        report("step_fingerprint", us, 0.0, fmt::format(",\"sources\":{}", sources));
    }

    std::vector<double> mine(9, 1.0), all(9 * static_cast<std::size_t>(ranks));
    const double without = timeIt([&] { MPI_Allgather(mine.data(), 7, MPI_DOUBLE, all.data(), 7, MPI_DOUBLE, MPI_COMM_WORLD); }, 2000);
    const double with = timeIt([&] {
        MPI_Allgather(mine.data(), 9, MPI_DOUBLE, all.data(), 9, MPI_DOUBLE, MPI_COMM_WORLD);
        std::vector<std::uint64_t> digests(static_cast<std::size_t>(ranks));
        for (int r = 0; r < ranks; ++r)
            digests[static_cast<std::size_t>(r)] = kiln::comm::joinDigest(all[r * 9 + 7], all[r * 9 + 8]);
        sink += kiln::comm::disagreementAmong("x", digests).size();
    }, 2000);
    report("step_allgather", with, without, "");

    const auto decision = stepFingerprint(1, 2);
    int one = 1;
    const double cheapest = timeIt([&] { MPI_Allreduce(MPI_IN_PLACE, &one, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD); }, 2000);
    const double check = timeIt([&] { kiln::comm::requireAgreement(MPI_COMM_WORLD, decision); }, 2000);
    report("require_agreement", check, cheapest, "");

    for (int pipelines : {4, 64}) {
        kiln::plan::Layout layout;
        layout.layers = 34;
        for (int p = 0; p < pipelines; ++p) {
            kiln::plan::PipelinePlacement pl;
            pl.nodes = 4;
            for (int s = 0; s < 16; ++s) pl.ranks.push_back(p * 16 + s);
            for (std::uint32_t c = 0; c <= 16; ++c) pl.cuts.push_back(c * 2);
            pl.nodeIds = {p * 4, p * 4 + 1, p * 4 + 2, p * 4 + 3};
            layout.pipelines.push_back(pl);
        }
        const double us = timeIt([&] { sink += kiln::plan::fingerprintOf(layout).digest(); }, 20);
        report("layout_fingerprint", us, 0.0, fmt::format(",\"pipelines\":{}", pipelines));
    }
    if (sink == 42) fmt::print("\n");  // keeps the work
    MPI_Finalize();
    return 0;
}
