#include "kiln/train/trainer.hpp"

#include "kiln/base/error.hpp"
#include "kiln/base/log.hpp"
#include "kiln/comm/mpi_check.hpp"
#include "kiln/comm/transport.hpp"
#include "kiln/comm/ulfm.hpp"
#include "kiln/data/loader.hpp"
#include "kiln/fault/fault_injector.hpp"
#include "kiln/fault/recovery.hpp"
#include "kiln/io/diag_file.hpp"
#include "kiln/model/gpt.hpp"
#include "kiln/train/adamw.hpp"
#include "kiln/train/checkpoint.hpp"
#include "kiln/train/train_config.hpp"

#include <ATen/autocast_mode.h>
#include <fmt/format.h>

#include <chrono>
#include <cmath>

namespace kiln::train {

using Clock = std::chrono::steady_clock;

namespace {

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string duration(double seconds) {
    const auto s = static_cast<long long>(seconds + 0.5);
    return s >= 3600 ? fmt::format("{}h{:02}m", s / 3600, s / 60 % 60) : fmt::format("{}m{:02}s", s / 60, s % 60);
}

// bf16 autocast for the forward pass: matmuls in bfloat16, reductions,
// norms and the loss in fp32; parameters and gradients stay fp32.
class AutocastScope {
public:
    AutocastScope(bool enabled, const torch::Device& device) : enabled_(enabled), cuda_(device.is_cuda()) {
        if (!enabled_) return;
        if (cuda_) {
            at::autocast::set_autocast_gpu_dtype(at::kBFloat16);
            at::autocast::set_enabled(true);
        } else {
            at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
            at::autocast::set_cpu_enabled(true);
        }
    }
    ~AutocastScope() {
        if (!enabled_) return;
        cuda_ ? at::autocast::set_enabled(false) : at::autocast::set_cpu_enabled(false);
        at::autocast::clear_cache();
    }
    AutocastScope(const AutocastScope&) = delete;
    AutocastScope& operator=(const AutocastScope&) = delete;

private:
    bool enabled_, cuda_;
};

torch::Device chooseDevice(const TrainConfig& config, const config::Deck& deck) {
    const bool cuda = torch::cuda::is_available();
    if (config.device == "cuda" && !cuda)
        throw InputError(fmt::format("{}: train.device = cuda, but libtorch sees no CUDA device here (is this libtorch "
                                     "built with CUDA? Debian's is CPU only); use cpu or auto",
                                     deck.setting("train.device").origin));
    if (config.device == "cuda" || (config.device == "auto" && cuda)) {
        const int local = static_cast<int>(log::rank() % std::max<std::int64_t>(1, torch::cuda::device_count()));
        return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(local));
    }
    return torch::Device(torch::kCPU);
}

}  // namespace

struct Trainer::State {
    const config::Deck& deck;
    comm::World& world;
    TrainConfig config;
    data::LoaderSpec spec;
    std::unique_ptr<data::Corpus> probe;
    model::ModelConfig modelConfig;
    std::unique_ptr<model::Gpt> model;
    std::unique_ptr<AdamW> optimizer;
    std::unique_ptr<data::DataLoader> loader;
    std::unique_ptr<comm::Transport> transport;
    std::unique_ptr<io::DiagFile> diag;
    std::unique_ptr<CheckpointStore> checkpoints;
    data::CursorContext context;
    std::filesystem::path runDir;
    torch::Device device{torch::kCPU};
    std::unique_ptr<fault::FaultInjector> injector;
    std::uint64_t nodeFailures = 0;  // nodes retired since start-up
    std::uint64_t f = 0;

    void openDiag(bool continueRun, const std::string& kind, const std::string& detail, std::uint64_t step) {
        std::vector<std::string> names;
        for (const auto& src : spec.sources) names.push_back(src.name);
        diag = std::make_unique<io::DiagFile>((runDir / "diag.h5").string(), deck.resolvedText(), names, continueRun);
        diag->event(step, kind, detail);
    }

    enum class Recovery { Continue, Leave, BeyondF };

    // On every survivor after an attempt failed: regroup, and either go on
    // with the same step on fewer ranks, leave (this rank's node is retired),
    // or stop with a checkpoint when more than f nodes are gone.
    Recovery recoverFromFailure(std::uint64_t step) {
        const auto t0 = Clock::now();
        const fault::RecoveryReport report = fault::recover(world);
        nodeFailures += report.retiredNodes.size();
        if (report.thisRankLeaves) {
            log::warn("step {}: this rank's node is retired ({}); it leaves the run", step, report.describe());
            return Recovery::Leave;
        }
        log::setIdentity(world.rank(), world.host());
        transport->interrupt();
        transport = comm::makeMpiTransport(world.control());
        const std::uint64_t G = spec.globalBatch, n = static_cast<std::uint64_t>(world.size()), r = world.rank();
        loader->setSlice(G * r / n, G * (r + 1) / n - G * r / n);
        const std::string detail = fmt::format("step {}: {}; recovered in {:.1f} ms", step, report.describe(),
                                               1e3 * since(t0));
        log::info("  FAILURE {}", detail);
        if (world.rank() == 0) {
            if (diag) {
                diag->event(step, "failure", detail);
            } else {
                openDiag(true, "failure", detail + " (diagnostics taken over by this rank)", step);
            }
        }
        if (nodeFailures > f) {
            log::info("  {} node failures, more than fault.f = {}: writing a checkpoint and stopping; requeue the job "
                      "to continue on the nodes it gets",
                      nodeFailures, f);
            checkpoint(loader->cursor().step);
            if (diag) diag->event(step, "stop", fmt::format("{} node failures > fault.f = {}", nodeFailures, f));
            return Recovery::BeyondF;
        }
        return Recovery::Continue;
    }

    State(const config::Deck& d, comm::World& w) : deck(d), world(w) {}

    // Sums every layer's gradient over the replicas, one flat buffer per layer.
    void allReduceGradients() {
        for (std::uint32_t l = 0; l < model->numLayers(); ++l) {
            auto params = model->layer(l).parameters();
            std::vector<torch::Tensor> grads;
            for (auto& p : params)
                grads.push_back(p.grad().defined() ? p.grad().reshape({-1}) : torch::zeros({p.numel()}, p.options()));
            // The MPI transport works on host memory (NCCL, on device memory, comes with pipelines).
            auto flat = torch::cat(grads).to(torch::kCPU).contiguous();
            transport->allReduceSum(flat.data_ptr<float>(), static_cast<std::size_t>(flat.numel()));
            flat = flat.to(device);
            std::int64_t offset = 0;
            for (auto& p : params) {
                if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
                p.mutable_grad().copy_(flat.slice(0, offset, offset + p.numel()).view_as(p));
                offset += p.numel();
            }
        }
    }

    double clipGradients() {
        torch::NoGradGuard noGrad;
        double squares = 0.0;
        for (auto& p : model->parameters()) squares += p.grad().pow(2).sum().item<double>();
        const double norm = std::sqrt(squares);
        if (config.gradClip > 0.0 && norm > config.gradClip)
            for (auto& p : model->parameters()) p.mutable_grad().mul_(config.gradClip / (norm + 1e-6));
        return norm;
    }

    void checkpoint(std::uint64_t step) {
        const auto t0 = Clock::now();
        const auto path = checkpoints->save(world.control(), step, *model, *optimizer, loader->cursor(), context,
                                            deck.resolvedText());
        const double seconds = since(t0);
        log::info("  checkpoint {} written in {:.2f} s", path.string(), seconds);
        if (diag) diag->event(step, "checkpoint", fmt::format("{} in {:.3f} s", path.filename().string(), seconds));
    }
};

Trainer::Trainer(const config::Deck& deck, comm::World& world) : state_(std::make_unique<State>(deck, world)) {
    State& s = *state_;
    s.config = trainConfigFromDeck(deck);
    if (s.config.threads > 0) torch::set_num_threads(s.config.threads);
    s.spec = data::loaderSpecFromDeck(deck);
    s.probe = std::make_unique<data::Corpus>(s.spec);
    s.context = data::cursorContext(s.spec, s.probe->tokenizer().id);
    s.modelConfig = model::modelConfigFromDeck(deck, s.probe->tokenizer().vocabSize);
    s.model = std::make_unique<model::Gpt>(s.modelConfig);
    s.device = chooseDevice(s.config, deck);
    s.model->to(s.device);
    s.optimizer = std::make_unique<AdamW>(*s.model, s.config);
    s.runDir = std::filesystem::path(deck.text("run.out_dir")) / deck.text("run.name");
    s.checkpoints = std::make_unique<CheckpointStore>(s.runDir / "ckpt", s.config.checkpointKeep);
    s.transport = comm::makeMpiTransport(world.control());

    data::Cursor cursor = data::BatchPlanner(s.spec, *s.probe).initial();
    std::optional<std::filesystem::path> latest;
    if (!s.config.resumeFrom.empty()) {
        latest = s.config.resumeFrom;
    } else if (s.config.resume) {
        latest = s.checkpoints->latest();
    }
    bool resumed = false;
    if (latest) {
        data::Cursor saved;
        try {
            CheckpointStore::load(*latest, *s.model, *s.optimizer, s.context, saved);
        } catch (const InputError& e) {
            throw InputError(fmt::format("{}\n  Checkpoints kept in {}: {}. Resume from another with --set "
                                         "checkpoint.from=FILE, or start afresh with --set checkpoint.resume=false.",
                                         e.what(), s.checkpoints->directory().string(), s.checkpoints->listing()));
        }
        cursor = data::BatchPlanner(s.spec, *s.probe).resume(saved);
        resumed = true;
        log::info("  resumed from {} at step {}", latest->string(), cursor.step);
    }
    s.loader = std::make_unique<data::DataLoader>(s.spec, cursor);
    const std::uint64_t G = s.spec.globalBatch, n = static_cast<std::uint64_t>(world.size()), r = world.rank();
    s.loader->setSlice(G * r / n, G * (r + 1) / n - G * r / n);
    if (world.rank() == 0)
        s.openDiag(resumed, resumed ? "resume" : "start",
                   resumed ? fmt::format("from {} on {} ranks", latest->filename().string(), world.size())
                           : fmt::format("{} ranks, {} parameters", world.size(), s.modelConfig.parameters()),
                   cursor.step);
    std::vector<fault::Injection> injections;
    fault::parseInjections(deck.text("fault.inject"), injections);
    s.injector = std::make_unique<fault::FaultInjector>(injections, world.originalRank());
    s.f = static_cast<std::uint64_t>(deck.integer("fault.f"));
    log::info("  model      GPT: {} blocks, d_model {}, {} heads, vocabulary {}, {:.2f} M parameters; {} {}",
              s.modelConfig.blocks, s.modelConfig.dModel, s.modelConfig.heads, s.modelConfig.vocabSize,
              s.modelConfig.parameters() / 1e6, s.device.str(), s.config.precision);
}

Trainer::~Trainer() = default;

namespace {

// What one attempt at a step computed; committed only if every survivor agrees.
struct Attempt {
    bool ok = true;
    double lossSum = 0.0, forward = 0.0, backward = 0.0, sync = 0.0;
};

}  // namespace

TrainSummary Trainer::run(std::uint64_t untilStep) {
    State& s = *state_;
    const std::uint64_t end = std::min(untilStep, s.config.steps);
    const std::uint64_t seqLen = s.spec.seqLen, L = seqLen + 1;
    const double targetsPerStep = double(s.spec.globalBatch * seqLen);
    TrainSummary summary;
    summary.firstStep = s.loader->cursor().step;
    const auto start = Clock::now();
    std::uint64_t stepsDone = 0;

    // Forward and backward of this rank's slice, then the sums over replicas.
    // A failed peer surfaces as ProcFailedError in a collective: the attempt
    // is marked failed and every transport interrupted, so that no survivor
    // waits on the dead one.
    const auto attempt = [&](std::uint64_t step, const data::Batch& batch) {
        Attempt a;
        try {
            for (auto& p : s.model->parameters())
                if (p.grad().defined()) p.mutable_grad().zero_();
            s.injector->at(step, fault::Phase::Forward);
            for (std::uint64_t first = 0; first < batch.count; first += s.config.microBatch) {
                const std::uint64_t m = std::min(s.config.microBatch, batch.count - first);
                std::vector<std::int64_t> ids(batch.tokens.begin() + first * L, batch.tokens.begin() + (first + m) * L);
                auto tokens = torch::from_blob(ids.data(), {static_cast<std::int64_t>(m), static_cast<std::int64_t>(L)},
                                               torch::kInt64)
                                  .to(s.device);
                const auto f0 = Clock::now();
                torch::Tensor loss;
                {
                    AutocastScope autocast(s.config.precision == "bf16", s.device);
                    auto logits = s.model->forward(tokens.slice(1, 0, L - 1));
                    loss = model::crossEntropySum(logits, tokens.slice(1, 1, L));
                }
                const auto f1 = Clock::now();
                s.injector->at(step, fault::Phase::Backward);
                (loss / targetsPerStep).backward();
                a.backward += since(f1);
                a.forward += std::chrono::duration<double>(f1 - f0).count();
                a.lossSum += loss.item<double>();
            }
            s.injector->at(step, fault::Phase::AllReduce);
            const auto s0 = Clock::now();
            KILN_MPI(MPI_Allreduce(MPI_IN_PLACE, &a.lossSum, 1, MPI_DOUBLE, MPI_SUM, s.world.control()));
            s.allReduceGradients();
            a.sync = since(s0);
        } catch (const ProcFailedError& e) {
            log::warn("step {}: {}", step, e.what());
            a.ok = false;
            comm::revoke(s.world.control());
            s.transport->interrupt();
        }
        s.injector->at(step, fault::Phase::Commit);
        // The commit: all survivors apply this step, or none does.
        if (s.world.faultTolerant()) a.ok = comm::agree(s.world.control(), a.ok ? 1 : 0) == 1;
        return a;
    };

    for (std::uint64_t step = s.loader->cursor().step; step < end; ++step) {
        const auto t0 = Clock::now();
        const data::Batch* batch = &s.loader->current();
        double wait = s.loader->lastWaitSeconds();
        Attempt a = attempt(step, *batch);
        while (!a.ok) {
            const auto outcome = s.recoverFromFailure(step);
            if (outcome != State::Recovery::Continue) {
                summary.stopped = outcome == State::Recovery::Leave ? TrainSummary::Stop::NodeRetired
                                                                    : TrainSummary::Stop::BeyondF;
                summary.lastStep = s.loader->cursor().step;
                summary.seconds = since(start);
                return summary;
            }
            // The same global batch, sliced over the survivors: the step is replayed.
            batch = &s.loader->current();
            wait += s.loader->lastWaitSeconds();
            a = attempt(step, *batch);
        }
        const double gradNorm = s.clipGradients();
        const double lr = learningRate(s.config, step);
        const auto o0 = Clock::now();
        s.optimizer->step(lr);
        const double optimizerTime = since(o0);

        const data::Cursor before = s.loader->cursor();
        s.loader->commit();
        const data::Cursor& after = s.loader->cursor();
        const double loss = a.lossSum / targetsPerStep, stepTime = since(t0);
        if (stepsDone == 0) summary.firstLoss = loss;
        summary.lastLoss = loss;
        ++stepsDone;

        if (s.diag) {
            std::vector<std::uint64_t> perSource;
            for (std::size_t i = 0; i < s.spec.sources.size(); ++i)
                perSource.push_back((after.sources[i].samples - before.sources[i].samples) * seqLen);
            s.diag->step({step, loss, lr, gradNorm, static_cast<std::uint64_t>(targetsPerStep), stepTime, wait, a.forward,
                          a.backward, a.sync, optimizerTime},
                         perSource);
        }
        if ((step + 1) % s.config.logEvery == 0 || step + 1 == end) {
            const double elapsed = since(start), tokensPerSecond = stepsDone * targetsPerStep / elapsed;
            log::info("step {:>6}/{}  loss {:.4f}  lr {:.2e}  |g| {:.3f}  {:.1f}k tok/s  wait {:.1f}%  ETA {}", step + 1,
                      s.config.steps, loss, lr, gradNorm, tokensPerSecond / 1e3, 100.0 * wait / stepTime,
                      duration(elapsed / stepsDone * double(end - step - 1)));
        }
        if (s.config.checkpointEvery > 0 && (step + 1) % s.config.checkpointEvery == 0 && step + 1 < end)
            s.checkpoint(step + 1);
    }
    if (stepsDone > 0) s.checkpoint(s.loader->cursor().step);
    summary.lastStep = s.loader->cursor().step;
    summary.seconds = since(start);
    summary.tokensPerSecond = summary.seconds > 0 ? stepsDone * targetsPerStep / summary.seconds : 0.0;
    if (s.diag)
        s.diag->event(summary.lastStep, "end",
                      fmt::format("{} steps in {:.1f} s, loss {:.4f}", stepsDone, summary.seconds, summary.lastLoss));
    return summary;
}

}  // namespace kiln::train
