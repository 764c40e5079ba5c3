// Recovery from node failures, on every survivor: regroup, migrate, or stop beyond f.
#include "trainer_state.hpp"

#include "kiln/base/error.hpp"
#include "kiln/base/log.hpp"
#include "kiln/comm/mpi_check.hpp"
#include "kiln/comm/ulfm.hpp"
#include "kiln/fault/recovery.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>

namespace kiln::train {

Trainer::State::Recovery Trainer::State::recoverFromFailure(std::uint64_t step, double detectSeconds) {
    const auto t0 = Clock::now();
    std::vector<std::string> rounds;
    std::vector<int> failedRanks, retiredNodes;
    io::FailureRecord record;
    record.step = step;
    record.detect = detectSeconds;
    for (;;) {
        try {
            const fault::RecoveryReport report = fault::recover(world);
            nodeFailures += report.retiredNodes.size();
            rounds.push_back(report.describe());
            failedRanks.insert(failedRanks.end(), report.failedRanks.begin(), report.failedRanks.end());
            retiredNodes.insert(retiredNodes.end(), report.retiredNodes.begin(), report.retiredNodes.end());
            ++record.rounds;
            record.revoke += report.revokeSeconds;
            record.shrink += report.shrinkSeconds;
            record.regroup += report.regroupSeconds;
            const auto text = [](const std::vector<int>& v) { return fmt::format("{}", fmt::join(v, ",")); };
            std::strncpy(record.failedRanks, text(failedRanks).c_str(), sizeof(record.failedRanks) - 1);
            std::strncpy(record.retiredNodes, text(retiredNodes).c_str(), sizeof(record.retiredNodes) - 1);
            if (report.thisRankLeaves) {
                // With no node left, or more than f lost, nobody goes on: the job must be requeued.
                const bool jobStops = report.nodesLeft == 0 || nodeFailures > f;
                log::warn("step {}: this rank's node is retired ({}); it leaves the run{}", step, report.describe(),
                          jobStops ? fmt::format(" with exit status 75 ({})",
                                                 report.nodesLeft == 0 ? "no node is left"
                                                                       : "more than fault.f nodes lost")
                                   : "");
                return jobStops ? Recovery::BeyondF : Recovery::Leave;
            }
            log::speakForJob(world.rank() == 0);
            if (world.rank() == 0 && !diag)
                openDiag(true, "takeover", "diagnostics taken over by this rank after rank 0 failed", step);
            injector->at(step, fault::Phase::Regroup);
            const std::string what = fmt::format("{}", fmt::join(rounds, "; then "));
            const auto stop = [&] {
                std::strncpy(record.layout, "stopped: beyond f", sizeof(record.layout) - 1);
                if (diag) diag->failure(record);
                return stopBeyondF(step, what, t0);
            };
            if (nodeFailures > f) return stop();
            // Within f: the instantiation for the surviving nodes, from the same templates.
            const auto c0 = Clock::now();
            const auto survivors = static_cast<std::uint32_t>(report.nodesLeft);
            const std::uint32_t minPipelines =
                static_cast<std::uint32_t>(std::max<std::uint64_t>(1, f + 1 - std::min(f + 1, nodeFailures)));
            plan::Instantiation inst;
            try {
                inst = plan::instantiate(plan.templates, survivors, minPipelines, plan.globalMicrobatches);
            } catch (const InputError& e) {
                log::warn("step {}: the {} surviving nodes cannot form {} pipelines from the templates: {}", step,
                          survivors, minPipelines, e.what());
                return stop();
            }
            plan::Layout layout = layoutFor(inst, /*keepLayers=*/true);
            const double choose = since(c0);
            const auto m0 = Clock::now();
            MigrationReport moved;
            try {
                moved = parallel->reconfigure(world, std::move(layout), layoutMembers,
                                              [&] { injector->at(step, fault::Phase::Migrate); });
            } catch (const ProcFailedError&) {
                throw;  // back to the start of the recovery
            } catch (const Error& e) {
                log::warn("step {}: {}", step, e.what());
                return stop();
            }
            layoutMembers = world.members();
            const auto r0 = Clock::now();
            parallel->connect(world);
            record.rebuild = since(r0);
            std::uint64_t totalBytes = moved.bytesReceived;
            KILN_MPI(MPI_Allreduce(MPI_IN_PLACE, &totalBytes, 1, MPI_UINT64_T, MPI_SUM, world.control()));
            sliceLoader();
            record.instantiate = choose;
            record.migrate = moved.migrateSeconds;
            record.bytesMigrated = totalBytes;
            std::vector<std::string> shares;
            for (const auto& p : parallel->layout().pipelines) shares.push_back(fmt::format("{}:{}", p.nodes, p.microbatches));
            std::strncpy(record.layout, fmt::format("{}", fmt::join(shares, "+")).c_str(), sizeof(record.layout) - 1);
            pendingFailure = record;
            const std::string detail = fmt::format(
                "step {}: {}; re-instantiated as {} in {:.2f} ms, migrated {:.2f} MB in {:.1f} ms; recovered in {:.1f} ms",
                step, what, parallel->layout().describe(), 1e3 * choose, totalBytes / 1e6, 1e3 * since(m0),
                1e3 * since(t0));
            log::info("  FAILURE {}", detail);
            if (diag) diag->event(step, "failure", detail);
            announceLayout(step, false, fmt::format("regrouped from the templates after step {} failed", step));
            return Recovery::Continue;
        } catch (const ProcFailedError& e) {
            log::warn("step {}: another failure during the recovery ({}); recovering again", step, e.what());
            comm::revoke(world.control());
            parallel->interrupt();
        }
    }
}

Trainer::State::Recovery Trainer::State::stopBeyondF(std::uint64_t step, const std::string& what, Clock::time_point t0) {
    log::info("  FAILURE step {}: {} ({:.1f} ms)", step, what, 1e3 * since(t0));
    const auto holders = holdersOfLayers(parallel->layout(), layoutMembers);
    const auto& members = world.members();
    std::vector<int> writers;
    std::vector<std::uint32_t> lost;
    for (std::uint32_t l = 0; l < holders.size(); ++l) {
        int writer = -1;
        for (int startup : holders[l]) {
            const auto it = std::find(members.begin(), members.end(), startup);
            if (it != members.end()) {
                writer = static_cast<int>(it - members.begin());
                break;
            }
        }
        if (writer < 0) lost.push_back(l);
        writers.push_back(writer);
    }
    const std::string reason = fmt::format("{} node failure{} since start-up, {} fault.f = {}", nodeFailures,
                                           nodeFailures == 1 ? "" : "s", nodeFailures > f ? "more than" : "within",
                                           f);
    if (lost.empty()) {
        log::info("  {}: writing a checkpoint of step {} from the surviving holders and stopping; requeue the job to "
                  "continue on the nodes it gets",
                  reason, loader->cursor().step);
        try {
            checkpoint(loader->cursor().step, writers);
            if (diag) diag->event(step, "stop", reason + "; checkpoint written, exit 75");
        } catch (const ProcFailedError& e) {
            // One more failure while writing: the previous checkpoint stays `latest`.
            const auto latest = checkpoints->latest();
            log::warn("step {}: another rank failed while the checkpoint was written ({}); nothing was written",
                      step, e.what());
            log::info("  a requeued job resumes from {}", latest ? latest->string() : "nothing (no checkpoint yet)");
            if (diag) diag->event(step, "stop", reason + "; the checkpoint failed, exit 75");
        }
    } else {
        const auto latest = checkpoints->latest();
        const std::string from = latest ? latest->string() : "nothing (no checkpoint yet: it starts afresh)";
        log::info("  {}: layers {} lost every holder; no checkpoint can be written. A requeued job resumes from {}",
                  reason, fmt::join(lost, ", "), from);
        if (diag)
            diag->event(step, "stop", fmt::format("{}; layers {} lost; resume from {}", reason, fmt::join(lost, ","), from));
    }
    return Recovery::BeyondF;
}

}  // namespace kiln::train
