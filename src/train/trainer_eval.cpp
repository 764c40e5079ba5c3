// The held-out evaluation (data.eval_mix, train.eval_every, train.eval_batches):
// the first eval_batches global batches of the validation sources, the same at
// every evaluation on any rank count or layout (the loader's order depends on
// the seed and the global batch only), run through the current pipelines with
// forwards alone. Nothing of the training state changes: no step, no cursor,
// no optimizer.
#include "trainer_state.hpp"

#include "kiln/base/error.hpp"
#include "kiln/base/log.hpp"
#include "kiln/comm/decision_check.hpp"
#include "kiln/comm/heartbeat.hpp"
#include "kiln/comm/mpi_check.hpp"
#include "kiln/comm/ulfm.hpp"
#include "kiln/data/agreed_batch.hpp"
#include "kiln/data/batch_planner.hpp"
#include "kiln/io/diag_file.hpp"
#include "kiln/io/fence.hpp"

#include <fmt/format.h>


namespace kiln::train {

double Trainer::State::heldOutLossSum(std::uint64_t steps) {
    State& s = *this;
    const auto& held = s.evaluation;
    const auto loader = s.openLoader(held.spec(), held.corpus(), data::BatchPlanner(held.spec(), *held.corpus()).initial());
    double lossSum = 0.0;
    for (std::uint64_t b = 0; b < held.batches(); ++b) {
        comm::trainingThreadAlive();
        const auto [batch, error] = data::currentBatchOrFirstError(*loader, s.world.control());
        if (!error.empty()) throw InputError(fmt::format("held-out evaluation after step {}: {}", steps, error));
        lossSum += s.parallel->evaluate(*batch);
        loader->commit();
    }
    // What the ranks evaluated rides along with the sum: checked at no extra collective.
    const comm::Fingerprint agreed = held.fingerprint(steps, io::fence().epoch(), s.parallel->layoutDigest());
    double mine[3] = {lossSum, 0.0, 0.0};
    comm::splitDigest(agreed.digest(), mine[1], mine[2]);
    std::vector<double> all(static_cast<std::size_t>(3 * s.world.size()));
    {
        const comm::PeerWait peers;  // waiting for the slowest rank is not this rank's hang
        KILN_MPI(MPI_Allgather(mine, 3, MPI_DOUBLE, all.data(), 3, MPI_DOUBLE, s.world.control()));
    }
    double sum = 0.0;
    std::vector<std::uint64_t> digests;
    for (std::size_t r = 0; r < all.size(); r += 3) {
        sum += all[r];
        digests.push_back(comm::joinDigest(all[r + 1], all[r + 2]));
    }
    if (!comm::disagreementAmong(agreed.decision(), digests).empty())
        comm::requireAgreement(s.world.control(), agreed, s.world.members());
    return sum;
}

Trainer::State::Recovery Trainer::State::evaluateSafely(std::uint64_t steps, std::uint64_t step) {
    for (;;) {
        const auto begun = Clock::now();
        bool ok = true;
        double lossSum = 0.0;
        try {
            injector->at(step, fault::Phase::Eval);
            lossSum = heldOutLossSum(steps);
        } catch (const ProcFailedError& e) {
            log::detail("step {}: a rank failed during the held-out evaluation: {}", step, e.what());
            ok = false;
            abandonStep();
        }
        // As a step's commit: every survivor records this evaluation, or every one redoes it.
        if (world.faultTolerant()) ok = comm::agree(world.control(), ok ? 1 : 0) == 1;
        if (ok) {
            const io::EvalRecord record = evaluation.record(steps, lossSum, since(begun));
            log::info("  eval after step {}: held-out loss {:.4f}, perplexity {:.2f} ({} batches, {} tokens, {:.2f} s)",
                      steps, record.loss, record.perplexity, evaluation.batches(), record.tokens, record.seconds);
            report.evaluation(record);
            report.failureReplayed(record.seconds);  // what was replayed is the evaluation
            return Recovery::Continue;
        }
        const auto outcome = recoverFromFailure(step, since(begun));
        if (outcome != Recovery::Continue) return outcome;
    }
}

}  // namespace kiln::train
