// Admission of new nodes into a running job: their processes start while the
// job trains (comm/spawn.hpp), get ready, and at the next step boundary
// become members, receive the run's state and wait as spares, or take layers
// at once when the job runs on fewer nodes than it started with
// (settleOnMoreNodes, which a retired straggler's return goes through too).
#include "trainer_state.hpp"

#include "kiln/train/startup_profile.hpp"

#include "kiln/base/error.hpp"
#include "kiln/base/log.hpp"
#include "kiln/base/packing.hpp"
#include "kiln/comm/broadcast.hpp"
#include "kiln/comm/decision_check.hpp"
#include "kiln/comm/error_agreement.hpp"
#include "kiln/comm/mpi_check.hpp"
#include "kiln/comm/spawn.hpp"
#include "kiln/comm/ulfm.hpp"
#include "kiln/data/cursor.hpp"
#include "kiln/fault/admit_request.hpp"
#include "kiln/fault/fault_injector.hpp"
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

// What a starting process needs of the job before it joins: to plan as the
// job did, its start-up nodes, ranks per node and fault.f; for the fault
// injector, the first start-up rank the new processes will have.
constexpr std::size_t kPreparationFields = 4;

std::string nodesAskedFor(int nodes) { return fmt::format("{} node{} asked for", nodes, nodes == 1 ? "" : "s"); }

}  // namespace

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

void Trainer::State::watchAdmission(std::uint64_t step) {
    if (world.rank() != 0 || admission.waiting()) return;
    const auto request = fault::takeAdmitRequest(runDir / "admit");
    if (!request.problem.empty()) log::warn("admission request ignored: {}", request.problem);
    if (request.nodes == 0) return;
    const int perNode = static_cast<int>(plan.cluster.ranksPerNode);
    admission.started(spawnedJoiners(request.nodes * perNode, request.hosts,
                                     std::vector<std::int64_t>{membership.startupNodes(), perNode, plan.f,
                                                               static_cast<std::int64_t>(world.nodes().nodeOfRank.size())}),
                      request.nodes);
    log::info("  admit      after step {}: {}; their processes start while the job trains", step,
              nodesAskedFor(request.nodes));
}

void Trainer::State::admissionGivenUp(std::uint64_t step, int nodes) {
    if (const std::string why = admission.giveUpFailed(); !why.empty()) log::warn("admission after step {}: {}", step, why);
    report.notice(step, "admit",
                  fmt::format("after step {}: {}, none admitted: their processes failed while they started (the "
                              "log says why); the job went on without waiting for them",
                              step, nodesAskedFor(nodes)));
}

Trainer::Trainer(const config::Deck& deck, comm::World& world, comm::JoinerLink& link)
    : state_(std::make_unique<State>(deck, world)) {
    state_->joinRunningJob(link);
}

void Trainer::State::joinRunningJob(comm::JoinerLink& link) {
    const auto& preparation = link.preparation();
    if (preparation.size() != kPreparationFields)
        throw Error(fmt::format("the running job sent {} preparation fields, this build expects {}: the job runs "
                                "another build of kiln",
                                preparation.size(), kPreparationFields),
                    ErrorScope::ThisRank);
    int rankAmongNew = 0;
    KILN_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rankAmongNew));
    const int futureRank = static_cast<int>(preparation[3]) + rankAmongNew;
    log::setIdentity(futureRank, world.host());  // the start-up rank it is to have, in all it says
    // Before joining, while the job trains: the deck, the data sources, the device and the plan.
    prepare(/*joining=*/true);
    const auto startupNodes = static_cast<std::uint32_t>(preparation[0]);
    // The job's plan, made again from the same deck for the same nodes.
    plan::ClusterSpec cluster = plan::clusterFromDeck(deck, startupNodes);
    cluster.nodes = startupNodes;
    cluster.ranksPerNode = static_cast<std::uint32_t>(preparation[1]);
    if (!device.is_cuda()) cluster.loaderBytesPerRank = double(corpus->memoryBudget());  // as the job counted it
    // A profile the job measured at start-up is the job's, not this process's to measure again.
    std::optional<plan::ModelProfile> measured;
    if (plan::profileMeasuredAtStartUp(deck)) {
        const auto path = startupProfilePath(runDir);
        if (!std::filesystem::exists(path))
            throw InputError(fmt::format("{} is missing: the job measured its profile at start-up (plan.device_tflops = 0) "
                                         "and an admitted process plans with the same one",
                                         path.string()));
        measured = plan::readProfile(path.string());
    }
    plan = plan::planRun(deck, modelConfig, cluster, plan::LowerF::DownToMinF,
                           measured ? plan::GivenProfile{&*measured, measured->device} : plan::GivenProfile{});
    if (static_cast<std::int64_t>(plan.f) != preparation[2])
        throw Error(fmt::format("this process planned with fault.f = {} but the job it joins runs with {}: its deck "
                                "or plan differs",
                                plan.f, preparation[2]),
                    ErrorScope::ThisRank);
    {
        std::vector<fault::Injection> injections;
        fault::parseInjections(deck.text("fault.inject"), injections);  // checked with the deck
        fault::FaultInjector(injections, futureRank).at(0, fault::Phase::Ready);
    }
    link.ready();
    // At the job's step boundary: the run's state as it is now.
    world.join(link.join());
    std::vector<std::int64_t> row;
    comm::broadcastVector(world.control(), row, MPI_INT64_T);
    const JoinState join = unpackJoinState(row);
    std::vector<std::string> names;
    for (const auto& source : spec.sources) names.push_back(source.name);
    const data::Cursor cursor = data::cursorFromRow(join.cursor, names);
    config.decaySteps = join.decaySteps;
    membership.readFrom(join);
    report.setHolder(join.diagHolder);
    describeReport();
    io::fence().arm(runDir / "epoch", join.fenceEpoch);
    memory.markBaseline(device.is_cuda() ? device.index() : -1);
    RowReader layout(join.layout);
    parallel = std::make_unique<ParallelState>(modelConfig, config, device, plan::unpackLayout(layout), world.rank(),
                                                 join.nccl, join.optimizerSteps);
    loader = openLoader(spec, corpus, cursor);
    armInjector();
    settleOnMoreNodes(cursor.step, fmt::format("nodes admitted after step {}", cursor.step));
}

Trainer::State::Recovery Trainer::State::admit(std::uint64_t step) {
    const auto t0 = Clock::now();
    // Who started the ready processes, found again: a recovery since the step may have renumbered the ranks.
    const bool ready = admission.ready();
    int from = ready ? world.rank() : world.size();
    KILN_MPI(MPI_Allreduce(MPI_IN_PLACE, &from, 1, MPI_INT, MPI_MIN, world.control()));
    if (from == world.size()) return Recovery::Continue;  // their spawner failed since: they end with it
    // The spawner's count of nodes and how long their start-up took, in one broadcast.
    double asked[2] = {from == world.rank() ? double(admission.nodes()) : 0.0,
                       from == world.rank() ? admission.readySeconds() : 0.0};
    KILN_MPI(MPI_Bcast(asked, 2, MPI_DOUBLE, from, world.control()));
    const int nodes = static_cast<int>(asked[0]);
    const double startSeconds = asked[1];
    const int perNode = static_cast<int>(plan.cluster.ranksPerNode);
    MPI_Comm merged = MPI_COMM_NULL;
    std::string problem;
    try {
        merged = comm::acceptJoiners(world.control(), from, from == world.rank() ? admission.spawned() : nullptr);
    } catch (const ProcFailedError&) {
        if (from == world.rank()) admission.clear();  // the new processes wait on the bridge or in the merge: they end
        throw;
    } catch (const std::exception& e) {
        problem = e.what();  // every rank alike (acceptJoiners)
    }
    if (from == world.rank()) admission.clear();
    if (!problem.empty()) {
        report.notice(step, "admit", fmt::format("after step {}: {}, none admitted: {}", step, nodesAskedFor(nodes), problem));
        return Recovery::Continue;
    }
    const auto before = world.members();
    const auto added = world.grow(merged, perNode);
    parallel->renumber(world, before);
    membership.layoutMadeForMembers();
    std::vector<std::int64_t> join = packJoinState(joinState());
    comm::broadcastVector(world.control(), join, MPI_INT64_T);
    std::string what = settleOnMoreNodes(step, fmt::format("nodes admitted after step {}", step));
    if (what.empty()) what = "they wait as spares";
    std::vector<std::string> names;
    for (int node : added) names.push_back(world.nodes().nodeNames[static_cast<std::size_t>(node)]);
    const std::string detail = fmt::format(
        "after step {}: {} node{} admitted ({}; start-up ranks {} to {}) in {:.1f} ms, after {:.2f} s of start-up "
        "while the job trained; {}",
        step, added.size(), added.size() == 1 ? "" : "s", fmt::join(names, ", "),
        before.empty() ? 0 : world.members()[before.size()], world.members().back(), 1e3 * since(t0), startSeconds, what);
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
