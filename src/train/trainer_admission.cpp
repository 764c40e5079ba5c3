// Admission of new nodes into a running job: processes spawned at a step
// boundary become members, receive the run's state and wait as spares, or
// take layers at once when the job runs on fewer nodes than it started with
// (settleOnMoreNodes, which a retired straggler's return goes through too).
#include "trainer_state.hpp"

#include "kiln/train/startup_profile.hpp"

#include "kiln/base/error.hpp"
#include "kiln/base/log.hpp"
#include "kiln/base/packing.hpp"
#include "kiln/comm/decision_check.hpp"
#include "kiln/comm/error_agreement.hpp"
#include "kiln/comm/mpi_check.hpp"
#include "kiln/comm/spawn.hpp"
#include "kiln/comm/ulfm.hpp"
#include "kiln/data/cursor.hpp"
#include "kiln/io/fence.hpp"
#include "kiln/plan/layout_packing.hpp"
#include "kiln/plan/plan_fingerprint.hpp"
#include "kiln/plan/regroup.hpp"
#include "kiln/train/startup_profile.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <optional>
#include <fmt/ranges.h>

namespace kiln::train {
namespace {

// Rank 0's packed join state on every rank of `comm`.
void broadcastJoin(MPI_Comm comm, std::vector<std::int64_t>& row) {
    std::int64_t size = static_cast<std::int64_t>(row.size());
    KILN_MPI(MPI_Bcast(&size, 1, MPI_INT64_T, 0, comm));
    row.resize(static_cast<std::size_t>(size));
    KILN_MPI(MPI_Bcast(row.data(), static_cast<int>(size), MPI_INT64_T, 0, comm));
}

}  // namespace

JoinState receiveJoinState(comm::World& world) {
    std::vector<std::int64_t> row;
    broadcastJoin(world.control(), row);
    return unpackJoinState(row);
}

JoinState Trainer::State::joinState() const {
    JoinState join;
    membership.writeTo(join);
    join.ranksPerNode = plan.cluster.ranksPerNode;
    join.f = plan.f;
    join.cursor = data::cursorToRow(loader->cursor());
    join.optimizerSteps = parallel->optimizer().steps();
    join.decaySteps = config.decaySteps;
    join.diagHolder = report.holder();
    join.nccl = parallel->nccl();
    join.fenceEpoch = io::fence().epoch();
    RowWriter layout;
    plan::packLayout(parallel->layout(), layout);
    join.layout = std::move(layout.row());
    return join;
}

Trainer::Trainer(const config::Deck& deck, comm::World& world, const JoinState& join)
    : state_(std::make_unique<State>(deck, world)) {
    State& s = *state_;
    s.prepare(/*joining=*/true);
    // The job's plan, made again from the same deck for the same nodes.
    plan::ClusterSpec cluster = plan::clusterFromDeck(deck, join.startupNodes);
    cluster.nodes = join.startupNodes;
    cluster.ranksPerNode = join.ranksPerNode;
    if (!s.device.is_cuda()) cluster.loaderBytesPerRank = double(s.corpus->memoryBudget());  // as the job counted it
    // A profile the job measured at start-up is the job's, not this process's to measure again.
    std::optional<plan::ModelProfile> measured;
    if (plan::profileMeasuredAtStartUp(deck)) {
        const auto path = startupProfilePath(s.runDir);
        if (!std::filesystem::exists(path))
            throw InputError(fmt::format("{} is missing: the job measured its profile at start-up (plan.device_tflops = 0) "
                                         "and an admitted process plans with the same one",
                                         path.string()));
        measured = plan::readProfile(path.string());
    }
    s.plan = plan::planRun(deck, s.modelConfig, cluster, plan::LowerF::DownToMinF,
                           measured ? plan::GivenProfile{&*measured, measured->device} : plan::GivenProfile{});
    if (join.f != s.plan.f)
        throw Error(fmt::format("this process planned with fault.f = {} but the job it joins runs with {}: its deck "
                                "or plan differs",
                                s.plan.f, join.f),
                    ErrorScope::ThisRank);
    std::vector<std::string> names;
    for (const auto& source : s.spec.sources) names.push_back(source.name);
    const data::Cursor cursor = data::cursorFromRow(join.cursor, names);
    s.config.decaySteps = join.decaySteps;
    s.membership.readFrom(join);
    s.report.setHolder(join.diagHolder);
    s.describeReport();
    io::fence().arm(s.runDir / "epoch", join.fenceEpoch);
    s.markMemoryBaseline();
    RowReader layout(join.layout);
    s.parallel = std::make_unique<ParallelState>(s.modelConfig, s.config, s.device, plan::unpackLayout(layout), world.rank(),
                                                 join.nccl, join.optimizerSteps);
    s.loader = std::make_unique<data::DataLoader>(s.spec, s.corpus, cursor);
    s.armInjector();
    s.settleOnMoreNodes(cursor.step, fmt::format("nodes admitted after step {}", cursor.step));
}

Trainer::State::Recovery Trainer::State::admit(std::uint64_t step, int nodes) {
    const auto t0 = Clock::now();
    const int perNode = static_cast<int>(plan.cluster.ranksPerNode);
    MPI_Comm merged = MPI_COMM_NULL;
    std::string problem;
    try {
        try {
            merged = comm::spawnJoiners(world.control(), nodes * perNode, admitHosts);
        } catch (const ProcFailedError&) {
            throw;
        } catch (const std::exception& e) {
            problem = e.what();
        }
        problem = comm::firstError(world.control(), problem);
    } catch (const ProcFailedError&) {
        // The new processes wait in the merge: a revoked communicator ends them.
        if (merged != MPI_COMM_NULL) {
            comm::revoke(merged);
            MPI_Comm_free(&merged);
        }
        throw;
    }
    admitHosts.clear();
    if (!problem.empty()) {
        if (merged != MPI_COMM_NULL) {
            comm::revoke(merged);
            MPI_Comm_free(&merged);
        }
        const std::string why = fmt::format("after step {}: {} node{} asked for, none admitted: {}", step, nodes,
                                            nodes == 1 ? "" : "s", problem);
        report.notice(step, "admit", why);
        return Recovery::Continue;
    }
    const auto before = world.members();
    const auto added = world.grow(merged, perNode);
    parallel->renumber(world, before);
    membership.layoutMadeForMembers();
    std::vector<std::int64_t> join = packJoinState(joinState());
    broadcastJoin(world.control(), join);
    std::string what = settleOnMoreNodes(step, fmt::format("nodes admitted after step {}", step));
    if (what.empty()) what = "they wait as spares";
    std::vector<std::string> names;
    for (int node : added) names.push_back(world.nodes().nodeNames[static_cast<std::size_t>(node)]);
    const std::string detail =
        fmt::format("after step {}: {} node{} admitted ({}; start-up ranks {} to {}) in {:.1f} ms; {}", step, added.size(),
                    added.size() == 1 ? "" : "s", fmt::join(names, ", "), before.empty() ? 0 : world.members()[before.size()],
                    world.members().back(), 1e3 * since(t0), what);
    report.notice(step, "admit", detail);
    return Recovery::Continue;
}

std::string Trainer::State::settleOnMoreNodes(std::uint64_t step, const std::string& why) {
    // Processes admitted now planned for themselves: the templates they regroup by must be the job's.
    comm::requireAgreement(world.control(), plan::fingerprintOf(plan.templates), world.members());
    // The instantiation a failure would regroup into now: when it is not the
    // one running (the job runs on fewer nodes than it started with), the new
    // nodes join pipelines at once; otherwise they wait as spares.
    const auto next = regroupNow(step);
    std::string what;
    const bool regroups = next.possible && !plan::runs(parallel->layout(), next.instantiation);
    const std::string from = parallel->layout().describe();
    const LayoutChange change =
        changeLayout(regroups ? std::optional(layoutFor(next)) : std::nullopt, step);
    if (regroups) {
        what = fmt::format("regrouped from {} to {}, {:.2f} MB of layers moved", from, parallel->layout().describe(),
                           change.bytesMigrated / 1e6);
        if (next.tolerance > membership.tolerance()) {
            const std::string back = fmt::format("fault tolerance back to {} simultaneous node failure{} (fault.f = {}): {}",
                                                 next.tolerance, next.tolerance == 1 ? "" : "s", plan.f, why);
            report.notice(step, "tolerance", back);
        }
    }
    membership.layoutTolerates(regroups ? next.tolerance : membership.tolerance(), next.spares);
    announceLayout(step, false, why);
    return what;
}

}  // namespace kiln::train
