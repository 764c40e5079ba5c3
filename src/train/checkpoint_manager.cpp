#include "kiln/train/checkpoint_manager.hpp"

#include "kiln/base/error.hpp"
#include "kiln/base/log.hpp"
#include "kiln/comm/heartbeat.hpp"
#include "kiln/comm/mpi_check.hpp"
#include "kiln/comm/ulfm.hpp"

#include <fmt/format.h>

#include <chrono>

namespace kiln::train {

using Clock = std::chrono::steady_clock;

namespace {

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

CheckpointManager::CheckpointManager(CheckpointStore& store, bool parallel) : store_(store), parallel_(parallel) {}

CheckpointManager::~CheckpointManager() { join(); }

void CheckpointManager::join() {
    if (writer_.joinable()) writer_.join();
}

void CheckpointManager::abandon() {
    join();
    pending_.reset();
    failure_ = nullptr;
    ended_ = true;
}

CheckpointWrite CheckpointManager::write(MPI_Comm comm, std::uint64_t step, const Source& source, const Hooks& hooks) {
    if (pending()) complete(comm);
    const auto t0 = Clock::now();
    if (!parallel_) {
        int rank = 0;
        KILN_MPI(MPI_Comm_rank(comm, &rank));
        // Format 1: one stage per layer (pipeline 0's), its shards gathered by rank 0.
        std::vector<std::vector<int>> writers;
        for (const auto& stages : source.holders) writers.push_back(stages.front());
        CheckpointWrite done;
        bool ok = true;
        try {
            done.path = store_.save(comm, step, *source.model, *source.optimizer, writers, source.cursor, source.context,
                                    source.deck, source.lrDecaySteps, hooks.beforeCommit);
        } catch (const ProcFailedError&) {
            ok = false;
        }
        comm::agreeOrThrow(comm, ok, "a checkpoint was written");
        done.step = step;
        done.stall = done.write = since(t0);
        done.writers = 1;
        return done;
    }
    start(comm, step, source, hooks);
    join();  // written now, on this thread's time
    auto done = complete(comm);
    if (!done) throw Error(fmt::format("checkpoint of step {} could not be written (see the warnings above)", step),
                           ErrorScope::AllRanks);
    done->stall = since(t0);
    return *done;
}

void CheckpointManager::start(MPI_Comm comm, std::uint64_t step, const Source& source, const Hooks& hooks) {
    if (pending()) complete(comm);
    const auto t0 = Clock::now();
    bool ok = true;
    try {
        pending_ = snapshot(comm, step, store_.directory(), *source.model, *source.optimizer, source.holders,
                            source.cursor, source.context, source.deck, source.lrDecaySteps);
    } catch (const ProcFailedError&) {
        ok = false;
    }
    if (!ok) pending_.reset();
    comm::agreeOrThrow(comm, ok, "a checkpoint's state was copied");
    hooks_ = hooks;
    progress_ = CheckpointWrite{};
    progress_.step = step;
    progress_.path = pending_->path();
    progress_.stall = since(t0);
    progress_.bytes = pending_->bytes;
    progress_.writers = pending_->writers;
    failure_ = nullptr;
    ended_ = false;
    writer_ = std::thread([this] {
        const comm::BackgroundWrite exempt;  // the training thread may wait on this write: not its hang
        const auto w0 = Clock::now();
        try {
            writePart(*pending_, hooks_.duringWrite);
        } catch (...) {
            failure_ = std::current_exception();
        }
        progress_.write = since(w0);
        ended_ = true;
    });
}

std::optional<CheckpointWrite> CheckpointManager::complete(MPI_Comm comm) {
    if (!pending()) return std::nullopt;
    const auto t0 = Clock::now();
    join();
    const double waited = since(t0);
    std::string problem;
    if (failure_) {
        try {
            std::rethrow_exception(failure_);
        } catch (const ProcFailedError&) {
            throw;
        } catch (const std::exception& e) {
            problem = e.what();
        }
    }
    // Every part in place, or the checkpoint is dropped everywhere; published
    // by rank 0, and the outcome agreed (a failed rank makes every survivor
    // throw here, and the recovery abandons the checkpoint).
    int rank = 0, bad = problem.empty() ? 0 : 1;
    KILN_MPI(MPI_Comm_rank(comm, &rank));
    bool ok = true;
    try {
        // Waiting for a slower writer, or behind a slow link, is not this rank's hang (hosts_slow_link: a rank
        // ended itself here after 15 s "outside MPI").
        const comm::PeerWait peers;
        KILN_MPI(MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_SUM, comm));
    } catch (const ProcFailedError&) {
        ok = false;
    }
    CheckpointSnapshot snapshot = std::move(*pending_);
    pending_.reset();
    if (ok && bad == 0 && rank == 0) publish(snapshot, store_.keep(), hooks_.beforeCommit);
    comm::agreeOrThrow(comm, ok, "a checkpoint was published");
    if (bad > 0) {
        if (!problem.empty()) log::warn("checkpoint of step {} dropped: this rank could not write its part: {}", snapshot.step, problem);
        if (rank == 0)
            log::warn("checkpoint of step {} dropped: {} rank{} could not write {} part; `latest` stays {}", snapshot.step, bad,
                      bad == 1 ? "" : "s", bad == 1 ? "its" : "their",
                      store_.latest() ? store_.latest()->filename().string() : std::string("unset"));
        return std::nullopt;
    }
    progress_.stall += waited;
    return progress_;
}

}  // namespace kiln::train
