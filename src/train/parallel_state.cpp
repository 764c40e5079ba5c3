#include "kiln/train/parallel_state.hpp"

#include "kiln/train/layer_state.hpp"

#include "kiln/base/error.hpp"
#include "kiln/base/log.hpp"
#include "kiln/comm/decision_check.hpp"
#include "kiln/comm/link_transport.hpp"
#include "kiln/comm/mpi_check.hpp"
#include "kiln/comm/ulfm.hpp"
#include "kiln/plan/plan_fingerprint.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <numeric>
#include <set>

namespace kiln::train {
namespace {

// Gradient buckets: large enough to amortise a collective, small enough to bound the copy.
constexpr std::size_t kBucketBytes = std::size_t{32} << 20;
// Tags of the transports that share the control communicator on the CPU
// (gradient groups: GradientSync's). A stage's tensor sums share one tag:
// different stages have no rank in common.
constexpr int kPipelineTag = 7, kMigrationTag = 8, kTensorTag = 9;

// What a transport of `tag` carries, for an error that names a stuck wait.
std::string transportLabel(int tag) {
    switch (tag) {
        case kPipelineTag: return "the pipeline's activations and gradients";
        case kMigrationTag: return "the migration of layers";
        case kTensorTag: return "the sums inside a split stage";
        default:
            return tag >= GradientSync::kFirstSegmentTag ? "the gradient sums with the other pipelines"
                                                         : "MPI transfers";
    }
}

model::SliceHandle sliceFor(const plan::RankRole& role) {
    auto slice = std::make_shared<model::TensorSlice>();
    slice->rank = static_cast<int>(role.slot);
    slice->width = static_cast<int>(role.width);
    return slice;
}

}  // namespace

ParallelState::ParallelState(const arch::ModelConfig& model, const TrainConfig& config, torch::Device device,
                             comm::World& world, plan::Layout layout)
    : modelConfig_(model), config_(config), device_(device), layout_(std::move(layout)) {
    role_ = layout_.role(world.rank());
    // NCCL refuses two ranks of one communicator on one GPU, and a
    // communicator cannot mix NCCL and MPI ranks: NCCL only where every rank
    // has a GPU of its own, MPI through host memory otherwise.
    std::string why;
    nccl_ = comm::ncclCanConnect(world.control(), device_.is_cuda() ? device_.index() : -1, why);
    if (device_.is_cuda() && !nccl_)
        log::info("  transport  MPI through host memory, not NCCL: {}; launch one rank per GPU for NCCL", why);
    slice_ = sliceFor(role_);
    model_ = std::make_unique<model::Gpt>(modelConfig_, role_.firstLayer, role_.endLayer, slice_, routerLog_);
    model_->to(device_);
    optimizer_ = std::make_unique<AdamW>(*model_, config_);
    connect(world);
}

ParallelState::ParallelState(const arch::ModelConfig& model, const TrainConfig& config, torch::Device device,
                             plan::Layout layout, int rank, bool nccl, std::uint64_t optimizerSteps)
    : modelConfig_(model), config_(config), device_(device), layout_(std::move(layout)), nccl_(nccl) {
    role_ = layout_.role(rank);
    slice_ = sliceFor(role_);
    model_ = std::make_unique<model::Gpt>(modelConfig_, role_.firstLayer, role_.endLayer, slice_, routerLog_);
    model_->to(device_);
    optimizer_ = std::make_unique<AdamW>(*model_, config_);
    optimizer_->setSteps(optimizerSteps);
}

ParallelState::~ParallelState() = default;

std::unique_ptr<comm::Transport> ParallelState::makeTransport(MPI_Comm comm, std::vector<int> group, int tag) const {
    int size = 0;
    KILN_MPI(MPI_Comm_size(comm, &size));
    if (group.empty())
        for (int r = 0; r < size; ++r) group.push_back(r);
    // On the CPU: messages on `comm` itself, no communicator created (safe right after a failure).
    if (!nccl_) return comm::makeMpiGroupTransport(comm, std::move(group), tag, transportLabel(tag));
    // A GPU transfer that has not finished by then has a dead or hung peer.
    const std::chrono::milliseconds deadline = config_.deviceDeadline();
    if (static_cast<int>(group.size()) == size) return comm::makeNcclTransport(comm, device_.index(), deadline);
    // NCCL needs a communicator of the group: created by its members alone.
    MPI_Group all = MPI_GROUP_NULL, members = MPI_GROUP_NULL;
    KILN_MPI(MPI_Comm_group(comm, &all));
    KILN_MPI(MPI_Group_incl(all, static_cast<int>(group.size()), group.data(), &members));
    MPI_Comm sub = MPI_COMM_NULL;
    const int rc = MPI_Comm_create_group(comm, members, tag, &sub);
    MPI_Group_free(&members);
    MPI_Group_free(&all);
    KILN_MPI(rc);
    auto transport = comm::makeNcclTransport(sub, device_.index(), deadline);
    MPI_Comm_free(&sub);
    return transport;
}

void ParallelState::redistribute(const plan::Instantiation& inst) {
    if (inst.pipelines.size() != layout_.pipelines.size())
        throw Error(fmt::format("a split of the batch over {} pipelines for a layout of {}", inst.pipelines.size(),
                                layout_.pipelines.size()),
                    ErrorScope::AllRanks);
    std::uint64_t next = 0;
    for (std::size_t p = 0; p < inst.pipelines.size(); ++p) {
        auto& pipeline = layout_.pipelines[p];
        pipeline.firstMicrobatch = next;
        pipeline.microbatches = inst.pipelines[p].microbatches;
        pipeline.predictedStepTime = inst.pipelines[p].stepTime;
        next += pipeline.microbatches;
    }
}

void ParallelState::requireSameLayout(const comm::World& world) {
    const auto fingerprint = plan::fingerprintOf(layout_, "the layout (pipelines, stages, ranks, split of the batch)");
    comm::requireAgreement(world.control(), fingerprint, world.members());
    layoutDigest_ = fingerprint.digest();
}

void ParallelState::connect(comm::World& world) {
    requireSameLayout(world);  // before any rank waits for a peer the layout names
    stage_.reset();
    gradients_.reset();
    tensor_.reset();
    slice_->allReduce = nullptr;
    if (!role_.idle() && role_.width > 1) {
        tensor_ = makeTransport(world.control(), layout_.stageRanks(role_), kTensorTag);
        // The sums run where the transport reads (host memory for MPI): a staging copy where that differs.
        slice_->allReduce = [t = tensor_.get(), device = device_](torch::Tensor& x) {
            const bool direct = x.is_cuda() == t->deviceMemory();
            auto buffer = direct ? x : x.to(t->deviceMemory() ? device : torch::Device(torch::kCPU));
            t->allReduceSum(buffer.data_ptr<float>(), static_cast<std::size_t>(buffer.numel()));
            if (!direct) x.copy_(buffer);
        };
    }
    // NCCL runs a communicator's operations in issue order: a pipeline gets a
    // channel per neighbour and direction (see link_transport.hpp).
    if (nccl_) {
        transport_ = comm::makeLinkTransport(world.control(), {role_.previous, role_.next},
                                             [this](MPI_Comm pair) { return makeTransport(pair); });
    } else {
        transport_ = makeTransport(world.control(), {}, kPipelineTag);
    }
    gradients_ = std::make_unique<GradientSync>(
        layout_, world.control(), *model_, kBucketBytes,
        [this](MPI_Comm comm, const std::vector<int>& group, int tag) { return makeTransport(comm, group, tag); });
    stage_ = std::make_unique<PipelineStage>(*model_, layout_, world.rank(), *transport_, device_,
                                             config_.precision == "bf16", config_.deviceDeadline());
}

StepWork ParallelState::runStep(const data::Batch& batch, double targetsPerStep, fault::FaultInjector& injector,
                                std::uint64_t step) {
    StepWork work;
    if (auto gradients = model_->gradients(); !gradients.empty()) at::_foreach_zero_(gradients);
    // By value: the sync keeps it until finish(), and a failed attempt leaves before that.
    gradients_->beginStep([injector = &injector, step] { injector->at(step, fault::Phase::Sums); });
    PipelineStage::LayerDone layerDone;
    const bool duringBackward =
        config_.gradSums == "during_backward" || (config_.gradSums == "auto" && gradients_->asynchronous());
    if (duringBackward) layerDone = [&](std::uint32_t l) { gradients_->layerReady(l); };
    work.stage = stage_->run(batch, targetsPerStep, injector, step, layerDone);
    injector.at(step, fault::Phase::AllReduce);
    const auto t0 = std::chrono::steady_clock::now();
    gradients_->finish(*model_, device_);
    work.squaredNorm = gradients_->squaredNorm(*model_);
    work.sumsSeconds = work.stage.sums + std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return work;
}

void ParallelState::renumber(const comm::World& world, const std::vector<int>& oldMembers) {
    const auto& members = world.members();
    std::vector<int> newRankOf(oldMembers.size(), -1);
    for (std::size_t r = 0; r < oldMembers.size(); ++r) {
        const auto it = std::find(members.begin(), members.end(), oldMembers[r]);
        if (it != members.end()) newRankOf[r] = static_cast<int>(it - members.begin());
    }
    layout_ = plan::renumbered(layout_, newRankOf, world.size());
    role_ = layout_.role(world.rank());
}

std::vector<std::vector<std::vector<int>>> ParallelState::holders() const {
    std::vector<std::vector<std::vector<int>>> out(layout_.layers);
    for (const auto& segment : layout_.segments) {
        std::vector<std::vector<int>> stages;
        std::size_t first = 0;
        for (std::uint32_t w : segment.widths) {
            stages.emplace_back(segment.holders.begin() + static_cast<std::ptrdiff_t>(first),
                                segment.holders.begin() + static_cast<std::ptrdiff_t>(first + w));
            first += w;
        }
        for (std::uint32_t l = segment.firstLayer; l < segment.endLayer; ++l) out[l] = stages;
    }
    return out;
}

void ParallelState::interrupt() {
    if (tensor_) tensor_->interrupt();
    if (transport_) transport_->interrupt();
    if (gradients_) gradients_->interrupt();
}

ParallelState::Target ParallelState::buildTarget(const comm::World& world, const plan::Layout& layout,
                                                const std::vector<int>& oldMembers) const {
    const int me = world.rank();
    const plan::RankRole role = layout.role(me);
    const auto keeps = [&](std::uint32_t l) { return plan::keepsLayer(layout_, oldMembers, layout, world.members(), me, l); };
    Target target;
    const bool sameShard = role.slot == role_.slot && role.width == role_.width;
    target.slice = sameShard ? slice_ : sliceFor(role);
    std::vector<model::Layer> layers;
    for (std::uint32_t l = role.firstLayer; l < role.endLayer; ++l) {
        if (keeps(l)) {
            layers.push_back(model_->sharedLayer(l - model_->firstLayer()));
        } else {
            auto built = model::buildLayer(modelConfig_, l, target.slice, routerLog_);
            built->to(device_);
            layers.push_back(built);
        }
    }
    target.model = std::make_unique<model::Gpt>(modelConfig_, role.firstLayer, std::move(layers), target.slice);
    target.optimizer = std::make_unique<AdamW>(*target.model, config_);
    target.optimizer->setSteps(optimizer_->steps());
    for (std::uint32_t l = role.firstLayer; l < role.endLayer; ++l) {
        if (!keeps(l)) continue;
        target.optimizer->firstMoments(l - role.firstLayer) = optimizer_->firstMoments(l - model_->firstLayer());
        target.optimizer->secondMoments(l - role.firstLayer) = optimizer_->secondMoments(l - model_->firstLayer());
    }
    return target;
}

MigrationReport ParallelState::moveLayers(const comm::World& world, const plan::MigrationPlan& plan,
                                          const plan::Layout& layout, Target& target, const PhaseHook& at) {
    MigrationReport report;
    const int me = world.rank();
    const plan::RankRole role = layout.role(me);
    const std::uint32_t atoms = plan.atoms;
    // The buffers outlive the transport, which completes pending sends when it goes.
    // On GPUs the layers move device to device over a fresh NCCL
    // communicator of the survivors (the old ones were aborted).
    std::vector<torch::Tensor> outgoing, incoming;
    std::vector<comm::Transport::Message> sends, receives;
    auto migration = makeTransport(world.control(), {}, kMigrationTag);
    const torch::Device where = migration->deviceMemory() ? device_ : torch::Device(torch::kCPU);
    const HeldShard oldShard{role_.slot, role_.width}, newShard{role.slot, role.width};
    const auto oldState = [&](std::uint32_t l) { return layerState(*model_, *optimizer_, l - model_->firstLayer()); };
    const auto newState = [&](std::uint32_t l) {
        return layerState(*target.model, *target.optimizer, l - role.firstLayer);
    };
    for (const auto& t : plan.transfers) {
        const auto specs = arch::shardSpecs(modelConfig_, t.layer);
        if (t.from == me && t.to == me) {
            unpackAtom(packAtom(oldState(t.layer), specs, oldShard, t.atom, atoms, device_), newState(t.layer), specs,
                       newShard, t.atom, atoms);
            continue;
        }
        if (t.from == me) {
            outgoing.push_back(packAtom(oldState(t.layer), specs, oldShard, t.atom, atoms, where));
            sends.push_back({outgoing.back().data_ptr(), static_cast<std::size_t>(outgoing.back().nbytes()), t.to});
            report.bytesSent += static_cast<std::uint64_t>(outgoing.back().nbytes());
        }
        if (t.to == me) {
            incoming.push_back(torch::empty({atomSize(modelConfig_, t.layer, t.atom, atoms)},
                                            torch::dtype(torch::kFloat32).device(where)));
            receives.push_back({incoming.back().data_ptr(), static_cast<std::size_t>(incoming.back().nbytes()), t.from});
        }
    }
    // All at once: two ranks may each hold what the other needs.
    migration->exchange(sends, receives, [&](std::size_t done) {
        if (done == 1 && at) at(fault::Phase::Received);
    });
    std::size_t next = 0;
    std::set<std::uint32_t> received;
    for (const auto& t : plan.transfers) {
        if (t.to != me || t.from == me) continue;
        unpackAtom(incoming[next], newState(t.layer), arch::shardSpecs(modelConfig_, t.layer), newShard, t.atom, atoms);
        report.bytesReceived += static_cast<std::uint64_t>(incoming[next].nbytes());
        received.insert(t.layer);
        ++next;
    }
    report.layersReceived = static_cast<std::uint32_t>(received.size());
    return report;
}

MigrationReport ParallelState::reconfigure(comm::World& world, plan::Layout layout, const std::vector<int>& oldMembers,
                                           const PhaseHook& at) {
    const auto& members = world.members();
    const plan::MigrationPlan plan = plan::planMigration(layout_, oldMembers, layout, members);
    if (!plan.lost.empty()) throw plan::LayersLostError(plan.lost);
    Target target = buildTarget(world, layout, oldMembers);

    // A failure here (or anywhere on the way to the agreement) leaves this
    // rank's current state untouched: the new one is only swapped in below.
    MigrationReport report;
    bool ok = true;
    const auto t0 = std::chrono::steady_clock::now();
    try {
        // Every rank moves layers by the same plan, or none moves any.
        comm::requireAgreement(world.control(), plan::fingerprintOf(layout, "the layout to regroup into"), members);
        if (at) at(fault::Phase::Migrate);
        report = moveLayers(world, plan, layout, target, at);
        if (at) at(fault::Phase::Migrated);
    } catch (const ProcFailedError&) {
        ok = false;
        comm::revoke(world.control());
    }
    // The commit of the new layout: every survivor switches, or none does.
    if (comm::agree(world.control(), ok ? 1 : 0) != 1)
        throw ProcFailedError("a rank failed while layers migrated; the survivors keep their layers and recover again",
                              0);
    report.migrateSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    role_ = layout.role(world.rank());
    layout_ = std::move(layout);
    slice_ = std::move(target.slice);
    model_ = std::move(target.model);
    optimizer_ = std::move(target.optimizer);
    // The communicators of the old layout: released (the transport first, see
    // connect()); connect() builds the new ones.
    transport_.reset();
    tensor_.reset();
    stage_.reset();
    gradients_.reset();
    return report;
}

}  // namespace kiln::train
