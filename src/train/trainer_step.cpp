#include "trainer_state.hpp"

#include "kiln/base/error.hpp"
#include "kiln/base/log.hpp"
#include "kiln/base/resident_memory.hpp"
#include "kiln/base/stop_request.hpp"
#include "kiln/comm/decision_check.hpp"
#include "kiln/comm/heartbeat.hpp"
#include "kiln/comm/mpi_check.hpp"
#include "kiln/comm/ulfm.hpp"
#include "kiln/data/agreed_batch.hpp"
#include "kiln/fault/admit_request.hpp"
#include "kiln/io/fence.hpp"
#include "kiln/model/compute_clock.hpp"
#include "kiln/model/cpu_allocations.hpp"
#include "kiln/model/device.hpp"
#include "kiln/model/device_memory.hpp"
#include "kiln/model/router_record.hpp"
#include "kiln/plan/flops.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <tuple>

namespace kiln::train {

namespace {

// This rank's peak memory in bytes: its GPU allocator's peak since the model was built, or the process's peak
// resident set on the CPU.
double peakMemoryBytes(const torch::Device& device) {
    if (device.is_cuda()) return double(model::deviceMemoryPeak(device.index()).allocated);
    return double(base::peakResidentBytes());
}

}  // namespace

namespace {

// What every rank must hold alike at each step: the step, the loader's cursor
// (so the same global batch) and the layout the step runs on.
comm::Fingerprint stepFingerprint(std::uint64_t step, const data::Cursor& c, std::uint64_t layoutDigest) {
    comm::Fingerprint f("the step, the loader's cursor and the layout");
    f.add("step", step).add("fence_epoch", io::fence().epoch()).add("cursor.step", c.step).add("cursor.samples", c.samples);
    f.add("cursor.segment_start", c.segmentStart).add("cursor.weights_hash", c.weightsHash);
    for (const auto& s : c.sources) {
        const std::string name = "cursor." + s.name + ".";
        f.add(name + "epoch", s.epoch).add(name + "doc_pos", s.docPos).add(name + "token_offset", s.tokenOffset);
        f.add(name + "samples", s.samples).add(name + "segment_base", s.segmentBase);
        f.add(name + "docs_done", s.docsDone).add(name + "tokens_dropped", s.tokensDropped);
    }
    return f.add("layout", layoutDigest);
}

// The step's router record summed over the ranks (the first rank of each stage records its blocks').
// One collective for the three tables.
model::RouterRecord summedRouterRecord(const model::RouterRecord& mine, MPI_Comm comm) {
    model::RouterRecord r = mine;
    std::vector<double> all;
    for (const auto* values : {&r.balanceSum, &r.zSum, &r.load}) all.insert(all.end(), values->begin(), values->end());
    KILN_MPI(MPI_Allreduce(MPI_IN_PLACE, all.data(), static_cast<int>(all.size()), MPI_DOUBLE, MPI_SUM, comm));
    auto from = all.begin();
    for (auto* values : {&r.balanceSum, &r.zSum, &r.load}) {
        std::copy(from, from + static_cast<std::ptrdiff_t>(values->size()), values->begin());
        from += static_cast<std::ptrdiff_t>(values->size());
    }
    return r;
}

}  // namespace

Trainer::State::Attempt Trainer::State::attempt(std::uint64_t step, double targetsPerStep, double& wait) {
    Attempt a;
    comm::setTrainingThreadLimit(clock.stepDeadline());
    injectMemoryFault(step);
    const auto begun = Clock::now();
    try {
        // Only the ranks that read a corrupt chunk see it: they tell the others.
        const auto [batch, dataError] = data::currentBatchOrFirstError(*loader, world.control());
        a.dataError = dataError;
        if (!a.dataError.empty()) return a;
        wait += loader->lastWaitSeconds();
        // The reference node times the block at the step's start; a benched straggler's ranks start theirs there
        // too, beside the step, and report the last that finished: a node still slower than a whole step held
        // every step up when they waited for it (a 30 ms step became 60 ms).
        const double probeSeconds =
            !probe ? 0.0 : probesBeside ? probe->runBeside(step, *injector) : probe->run(step, *injector);
        const auto& experts = modelConfig.experts;
        auto& router = parallel->routerLog();
        if (experts.any()) router.record.reset(modelConfig.blocks, experts.count);
        router.lossScale = 1.0 / targetsPerStep;  // as the summed cross-entropy's gradient is scaled
        const StepWork work = parallel->runStep(*batch, targetsPerStep, *injector, step);
        a.work = work.stage;
        const auto s0 = Clock::now();
        // One collective over every rank for the step's scalars: the loss,
        // the squared gradient norm, and the stop signal (so that every
        // rank learns of it in the same step).
        const bool stop = stopSignal() != 0 || (world.rank() == 0 && stopFileExists());
        watchAdmission(step);
        // Ready: the nodes' count; given up: minus it.
        const double admitField = admission.stepField();
        // Gathered rather than summed: every rank also learns every rank's
        // compute and probe times (the speed monitor's input), and sums the
        // first kSummed fields in rank order.
        // The step's fingerprint rides along (two doubles): checked before the commit at no extra collective.
        // Then the numbers' check (numeric_guard.hpp): the sums of what this rank sent, and its history's bounds.
        constexpr int kSummed = 5, kFields = kSummed + 11;
        const comm::Fingerprint agreed = stepFingerprint(step, loader->cursor(), parallel->layoutDigest());
        double digestHigh = 0.0, digestLow = 0.0;
        comm::splitDigest(agreed.digest(), digestHigh, digestLow);
        const double mine[kFields] = {work.stage.lossSum, work.squaredNorm, stop ? 1.0 : 0.0,
                                      admitField,
                                      checkpoints->writeEnded() ? 0.0 : 1.0,
                                      work.stage.forward + work.stage.backward, probeSeconds, digestHigh, digestLow,
                                      work.stage.forwardDigest, work.stage.backwardDigest, numerics.lossBound(),
                                      numerics.normBound(), work.stage.sentPeak, peakMemoryBytes(device),
                                      static_cast<double>(checkpointLost)};
        std::vector<double> all(static_cast<std::size_t>(kFields * world.size()));
        // Blocking, not polled against the deadline: Open MPI's non-blocking collectives (libnbc) report a
        // failed peer as MPI_ERR_OTHER, not as a process failure, and the survivors could not recover.
        {
            const comm::PeerWait peers;  // waiting for the slowest rank is not this rank's hang
            KILN_MPI(MPI_Allgather(mine, kFields, MPI_DOUBLE, all.data(), kFields, MPI_DOUBLE, world.control()));
            if (experts.any()) a.router = summedRouterRecord(router.record, world.control());
        }
        double sums[kSummed] = {};
        a.compute.resize(static_cast<std::size_t>(world.size()));
        a.probe.resize(a.compute.size());
        std::vector<std::uint64_t> digests(a.compute.size());
        auto& figures = a.figures;
        for (auto* column : {&figures.loss, &figures.norm, &figures.forward, &figures.backward})
            column->assign(a.compute.size(), 0.0);
        for (std::size_t r = 0; r < a.compute.size(); ++r) {
            const double* row = &all[r * kFields];
            figures.loss[r] = row[0];
            figures.norm[r] = row[1];
            figures.forward[r] = row[kSummed + 4];
            figures.backward[r] = row[kSummed + 5];
            a.lossBound = std::max(a.lossBound, row[kSummed + 6]);
            a.normBound = std::max(a.normBound, row[kSummed + 7]);
            // NaN too: a rank whose sent values are not all finite sent its peak as NaN.
            if (!std::isnan(a.sentPeak) && !(row[kSummed + 8] <= a.sentPeak)) {
                a.sentPeak = row[kSummed + 8];
                a.peakRank = static_cast<int>(r);
            }
            for (int k = 0; k < kSummed; ++k) sums[k] += row[k];
            a.peakMemory = std::max(a.peakMemory, row[kSummed + 9]);
            a.checkpointLost = std::max(a.checkpointLost, static_cast<std::uint64_t>(row[kSummed + 10]));
            a.compute[r] = row[kSummed];
            a.probe[r] = row[kSummed + 1];
            digests[r] = comm::joinDigest(row[kSummed + 2], row[kSummed + 3]);
            a.admitNodes = std::max(a.admitNodes, static_cast<int>(row[3]));
            a.admitGivenUp = std::max(a.admitGivenUp, static_cast<int>(-row[3]));
        }
        // Every rank saw the same digests: all name the difference together, and nobody commits.
        if (!comm::disagreementAmong(agreed.decision(), digests).empty())
            comm::requireAgreement(world.control(), agreed, world.members());
        a.lossSum = sums[0];
        a.gradNorm = std::sqrt(sums[1]);
        a.stopRequested = sums[2] > 0;
        a.checkpointWriting = static_cast<int>(sums[4]);
        a.sync = work.sumsSeconds + since(s0);
    } catch (const ProcFailedError& e) {
        log::detail("step {}: {}", step, e.what());
        a.ok = false;
        abandonStep();
    }
    injector->at(step, fault::Phase::Commit);
    // The commit: all survivors apply this step, or none does.
    if (world.faultTolerant()) a.ok = comm::agree(world.control(), a.ok ? 1 : 0) == 1;
    a.seconds = since(begun);
    return a;
}

}  // namespace kiln::train

namespace kiln::train {

namespace {

// The step's routers per block: the balance loss per sequence, the z-loss per token, and the loads.
io::RouterRow routerRow(const model::RouterRecord& r, double sequences, double tokens) {
    io::RouterRow row{r.balanceSum, r.zSum, r.load};
    for (auto& b : row.balance) b /= sequences;
    for (auto& z : row.z) z /= tokens;
    return row;
}

std::string duration(double seconds) {
    const auto s = static_cast<long long>(seconds + 0.5);
    return s >= 3600 ? fmt::format("{}h{:02}m", s / 3600, s / 60 % 60) : fmt::format("{}m{:02}s", s / 60, s % 60);
}

}  // namespace

Trainer::State::Recovery Trainer::State::attemptUntilAgreed(std::uint64_t step, double targetsPerStep, Committed& done) {
    Attempt& a = done.attempt;
    a = attempt(step, targetsPerStep, done.wait);
    if (!a.dataError.empty()) throw InputError(a.dataError);
    while (!a.ok) {
        const auto outcome = recoverFromFailure(step, a.seconds);
        if (outcome != Recovery::Continue) return outcome;
        // The same global batch, over the new pipelines: the step is replayed.
        a = attempt(step, targetsPerStep, done.wait);
        if (!a.dataError.empty()) throw InputError(a.dataError);
        if (a.ok) report.failureReplayed(a.seconds);
    }
    return Recovery::Continue;
}

Trainer::State::Recovery Trainer::State::commitStep(std::uint64_t step, double targetsPerStep, Committed& done) {
    const auto t0 = Clock::now();
    done = Committed{};
    Attempt& a = done.attempt;
    if (const auto outcome = attemptUntilAgreed(step, targetsPerStep, done); outcome != Recovery::Continue) return outcome;
    // Nothing is applied that was not checked: every rank judges the same figures alike (numeric_guard.hpp).
    for (NumericVerdict flag = judge(a, targetsPerStep); flag.flagged() && !done.skipped; flag = judge(a, targetsPerStep))
        if (const auto outcome = answerNumericFlag(step, targetsPerStep, done, flag); outcome != Recovery::Continue)
            return outcome;
    if (done.skipped) {
        // The batch is consumed without an update; the history does not take its numbers.
        done.before = loader->cursor();
        loader->commit();
        done.loss = a.lossSum / targetsPerStep;
        done.stepSeconds = since(t0);
        clock.committed(done.stepSeconds);
        comm::setTrainingThreadLimit(clock.boundaryLimit());
        return Recovery::Continue;
    }
    if (config.gradClip > 0.0 && a.gradNorm > config.gradClip) {
        torch::NoGradGuard noGrad;
        // An idle rank (a spare, a standby node) has no gradients, and libtorch refuses an empty list.
        if (auto gradients = parallel->model().gradients(); !gradients.empty())
            at::_foreach_mul_(gradients, config.gradClip / (a.gradNorm + 1e-6));
    }
    injector->at(step, fault::Phase::Optimizer);
    done.lr = learningRate(config, step);
    const auto o0 = Clock::now();
    parallel->optimizer().step(done.lr);
    model::waitForDevice(device, config.deviceDeadline());
    done.optimizerSeconds = since(o0);
    done.before = loader->cursor();
    loader->commit();
    done.loss = a.lossSum / targetsPerStep;
    numerics.committed(done.loss, a.gradNorm);
    done.stepSeconds = since(t0);
    model::trimCpuCache();  // what this step did not use goes back: a step's sizes repeat
    clock.committed(done.stepSeconds);
    comm::setTrainingThreadLimit(clock.boundaryLimit());
    return Recovery::Continue;
}

void Trainer::State::choosePeak() {
    const std::string given = deck.text("train.peak_tflops");
    const bool bf16 = deck.text("train.precision") == "bf16";
    if (given != "auto") {
        peakFlopsPerRank = std::stod(given) * 1e12;  // the deck's check took only a number > 0
        log::info("  MFU        against {} TFLOP/s a rank (train.peak_tflops)", given);
        return;
    }
    const std::string name = model::deviceName(device);
    if (const auto* peak = plan::devicePeakOf(name)) {
        peakFlopsPerRank = (bf16 ? peak->bf16 : peak->tf32) * 1e12;
        log::info("  MFU        against {:g} TFLOP/s a rank: {} ({}, dense {})", peakFlopsPerRank / 1e12, name, peak->name,
                  bf16 ? "bf16" : "TF32");
    } else {
        log::info("  MFU        not reported: no peak known for device \"{}\" (set train.peak_tflops)", name);
    }
}

std::pair<double, double> Trainer::State::utilization(double tokensPerSecond) const {
    if (peakFlopsPerRank <= 0 || !parallel) return {0.0, 0.0};
    const auto flops = plan::flopsPerToken(modelConfig, parallel->layout().pipelines);
    const double peak = peakFlopsPerRank * double(world.size());
    return {tokensPerSecond * flops.model / peak, tokensPerSecond * flops.hardware / peak};
}

void Trainer::State::recordStep(std::uint64_t step, const Committed& done, double targetsPerStep) {
    const Attempt& a = done.attempt;
    io::StepRecord record{step, done.loss, done.lr, a.gradNorm, static_cast<std::uint64_t>(targetsPerStep),
                          done.stepSeconds, done.wait, a.work.forward, a.work.backward, a.sync,
                          done.optimizerSeconds, a.work.waiting};
    std::tie(record.mfu, record.hfu) = utilization(done.stepSeconds > 0 ? targetsPerStep / done.stepSeconds : 0.0);
    record.peakMemory = a.peakMemory;
    std::vector<std::uint64_t> sourceTokens;
    const data::Cursor& after = loader->cursor();
    for (std::size_t i = 0; i < spec.sources.size(); ++i)
        sourceTokens.push_back((after.sources[i].samples - done.before.sources[i].samples) * spec.seqLen);
    report.step(record, std::move(sourceTokens), routerRow(a.router, double(spec.globalBatch), targetsPerStep));
}

void Trainer::State::logProgress(std::uint64_t step, const Committed& done, double tokensPerSecond, double eta) const {
    const Attempt& a = done.attempt;
    // f: the simultaneous node failures the current layout survives (fault.f, or fewer once nodes run out).
    // A mixture of experts: the balance loss (1 when every expert gets its share) and the z-loss, over the blocks.
    std::string router;
    if (!a.router.empty())
        router = fmt::format("  balance {:.3f}  z {:.2f}", a.router.meanBalance(double(spec.globalBatch)),
                             a.router.meanZ(double(spec.globalBatch) * spec.seqLen));
    if (done.skipped) {
        log::info("step {:>6}/{}  batch skipped: its numbers repeat on a rerun (NUMERICS above)  ETA {}  f {}", step + 1,
                  config.steps, duration(eta), membership.tolerance());
        return;
    }
    const double mfu = utilization(tokensPerSecond).first;
    log::info("step {:>6}/{}  loss {:.4f}{}  lr {:.2e}  |g| {:.3f}  {:.1f}k tok/s{}  wait {:.1f}%  ETA {}  f {}{}", step + 1,
              config.steps, done.loss, router, done.lr, a.gradNorm, tokensPerSecond / 1e3,
              mfu > 0 ? fmt::format("  MFU {:.1f}%", 100 * mfu) : std::string(),
              100.0 * done.wait / done.stepSeconds, duration(eta), membership.tolerance(),
              membership.spares() > 0 ? fmt::format(" +{} spare", membership.spares()) : std::string());
}

}  // namespace kiln::train
