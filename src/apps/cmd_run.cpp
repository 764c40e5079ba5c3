// kiln run DECK: start the MPI world, check the deck against it, report.
#include "cli_options.hpp"
#include "kiln/base/startup_clock.hpp"
#include "kiln/base/error.hpp"
#include "kiln/base/log.hpp"
#include "kiln/base/stop_request.hpp"
#include "kiln/comm/deadline.hpp"
#include "kiln/comm/ft_transport.hpp"
#include "kiln/comm/mpi_check.hpp"
#include "kiln/comm/spawn.hpp"
#include "kiln/comm/world.hpp"
#include "kiln/config/deck.hpp"
#include "kiln/io/atomic_file.hpp"
#include "kiln/io/launch_record.hpp"
#include "kiln/train/trainer.hpp"
#include "subcommands.hpp"
#include "versions.hpp"
#include "world_check.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

namespace kiln::apps {
namespace {

std::string describeRanks(const std::vector<int>& ranks) {
    if (ranks.size() > 2 && ranks.back() - ranks.front() + 1 == static_cast<int>(ranks.size()))
        return fmt::format("{}-{}", ranks.front(), ranks.back());
    return fmt::format("{}", fmt::join(ranks, ","));
}

// The shortest fault.hang_timeout_s that a lossy link between hosts did not turn into false detections.
constexpr double kLeastHangTimeoutAcrossHosts = 30.0;

void reportWorld(const comm::World& world, const config::Deck& deck) {
    const auto& nodes = world.nodes();
    log::info("kiln {} run '{}' from {}", kilnVersion(), deck.text("run.name"), deck.name());
    log::info("  MPI        {}", comm::mpiLibraryVersion());
    const char* source = "grouped by host name";
    if (world.nodeSource() == comm::World::NodeSource::Slurm) source = "Slurm's nodes (SLURMD_NODENAME)";
    log::info("  ranks      {} on {} node{} ({})", world.size(), nodes.numNodes(), nodes.numNodes() == 1 ? "" : "s",
              world.nodeSource() == comm::World::NodeSource::Emulated
                  ? fmt::format("emulated: cluster.ranks_per_node = {}", deck.integer("cluster.ranks_per_node"))
                  : std::string(source));
    for (int n = 0; n < nodes.numNodes(); ++n)
        log::info("    node {:<3} {:<16} ranks {}", n, nodes.nodeNames[n], describeRanks(nodes.ranksOfNode[n]));
    const auto f = deck.integer("fault.f");
    log::info("  faults     ULFM {}; fault.f = {}{}", world.faultTolerant() ? "active" : "off", f,
              world.faultTolerant() ? fmt::format(" (up to {} simultaneous node failure{} survived without restart, again after "
                                                  "each failure while the nodes allow)",
                                                  f, f == 1 ? "" : "s")
                                    : "");
    if (world.faultTolerant()) log::info("  faults     guard against Open MPI's crash in a shrink hit by a second failure: {}", comm::revokeGuardStatus());
    if (world.faultTolerant() && f > 0) {
        // Issue 64: ULFM's guarantees hold on one transport only; said by name before any step runs.
        const comm::TransportReport transport = comm::faultTolerantTransport();
        if (transport.faultTolerant)
            log::info("  faults     transport pml {} (the one Open MPI's ULFM supports)", transport.pml);
        else if (log::speaksForJob())
            log::warn("fault.f = {}, but the MPI transport is pml {}: {}", f, transport.pml, transport.advice);
        // Issue 64, item 5: across hosts, heartbeats share TCP connections with the data, and a link that loses
        // packets stalls a connection for seconds; measured on emulated hosts, 50 ms and 5 % loss on one link
        // made Open MPI's detector call healthy ranks dead at 5 s and 15 s, not at 30 s or 60 s.
        const double hang = deck.real("fault.hang_timeout_s");
        // Issue 64, item 5: how long a host gone silent takes to be declared, from the ranks' order.
        if (hang > 0 && world.nodeSource() != comm::World::NodeSource::Emulated && world.nodes().numNodes() > 1) {
            const int run = comm::longestRunOfOneNode(world.nodes());
            if (run == 1)
                log::info("  faults     a host gone silent: all its ranks declared failed within {:g} s (fault.hang_timeout_s: "
                          "each is watched by Open MPI's detector from another host)", hang);
            else
                log::info("  faults     a host gone silent: all its ranks declared failed within {:g} s (fault.hang_timeout_s x "
                          "{}: Open MPI's detector finds {} consecutive ranks of a host one at a time; ranked round-robin "
                          "over the hosts, mpirun --rank-by node, they are found in one timeout)",
                          hang * (2 * run - 1), 2 * run - 1, run);
        }
        if (hang > 0 && hang < kLeastHangTimeoutAcrossHosts && world.nodeSource() != comm::World::NodeSource::Emulated &&
            world.nodes().numNodes() > 1 && log::speaksForJob())
            log::warn("{}: fault.hang_timeout_s = {:g} s across {} hosts: heartbeats wait behind data on a link that "
                      "loses packets, and Open MPI's detector may then declare healthy ranks failed (measured: 50 ms and "
                      "5 % loss on one link, false at 15 s); keep it at {:g} s or more on a cluster",
                      deck.setting("fault.hang_timeout_s").origin, hang, world.nodes().numNodes(),
                      kLeastHangTimeoutAcrossHosts);
    }
    const auto& mix = deck.mix("data.mix");
    double total = 0.0;
    for (const auto& e : mix) total += e.weight;
    std::string mixText;
    for (const auto& e : mix) mixText += fmt::format(" {} {:.1f}%", e.source, 100.0 * e.weight / total);
    const auto seqLen = deck.integer("data.seq_len"), batch = deck.integer("data.global_batch");
    log::info("  data       mix{}; global batch {} x {} tokens = {} tokens/step", mixText, batch, seqLen + 1,
              batch * (seqLen + 1));
}

// The deck's demands that depend on the world: refused on every rank alike.
void checkDeckAgainstWorld(const comm::World& world, const config::Deck& deck) {
    const auto f = deck.integer("fault.f");
    if (f > 0 && !world.faultTolerant())
        throw InputError(fmt::format(
            "{}: fault.f = {} asks to survive node failures, but fault tolerance is not active in this job.\n"
            "  Launch with ULFM on (mpirun --with-ft ulfm ...), or set fault.f = 0 to run without it.",
            deck.setting("fault.f").origin, f));
    const auto perNode = deck.integer("cluster.ranks_per_node");
    if (world.nodeSource() == comm::World::NodeSource::Slurm && perNode > 0)
        for (int n = 0; n < world.nodes().numNodes(); ++n)
            if (static_cast<std::int64_t>(world.nodes().ranksOfNode[n].size()) != perNode)
                throw InputError(fmt::format(
                    "{}: cluster.ranks_per_node = {}, but Slurm placed {} rank{} on node {}.\n  Ask Slurm for {} tasks "
                    "per node (sbatch --ntasks-per-node={}), or set cluster.ranks_per_node = 0 to take Slurm's placement.",
                    deck.setting("cluster.ranks_per_node").origin, perNode, world.nodes().ranksOfNode[n].size(),
                    world.nodes().ranksOfNode[n].size() == 1 ? "" : "s", world.nodes().nodeNames[n], perNode, perNode));
    // Fewer nodes than f + 1 (a requeue onto fewer nodes) lowers f, down to fault.min_f: plan::planRun does it,
    // the one place that does; refused here is only what no f it may take can run with.
    const auto floor = std::min(deck.integer("fault.min_f"), f);
    if (world.nodes().numNodes() < floor + 1)
        throw InputError(fmt::format(
            "{}: fault.f = {} needs at least {} nodes (f+1 pipeline replicas, one node each at least), "
            "but this job has {} node{} ({} ranks), and fault.min_f = {} forbids running with less.\n  Ask for more "
            "nodes, or lower fault.f or fault.min_f to at most {}.",
            deck.setting("fault.f").origin, f, floor + 1, world.nodes().numNodes(), world.nodes().numNodes() == 1 ? "" : "s",
            world.size(), deck.integer("fault.min_f"), world.nodes().numNodes() - 1));
}

// How a training process ends: the requeue status when the job must go on
// later, and a watchdog where MPI_Finalize may wait for dead peers.
int finishRun(const train::TrainSummary& summary, const std::filesystem::path& runDir, double finalizeTimeout) {
    int status = 0;
    if (summary.stopped == train::TrainSummary::Stop::BeyondF || summary.stopped == train::TrainSummary::Stop::Requested)
        status = 75;  // EX_TEMPFAIL: requeue
    if (summary.stopped == train::TrainSummary::Stop::Numerics)
        status = 3;  // the data or the model: a requeue would meet the same numbers
    // After failures MPI_Finalize may never return (see armExitWatchdog), and a process whose work is done must
    // not hang the job in its teardown whatever the cause (a failure-free numerics stop once sat in it until the
    // test's timeout): the job ends on its own, with the status it earned.
    const bool afterFailures = summary.nodeFailures > 0 || summary.stopped == train::TrainSummary::Stop::BeyondF;
    comm::armExitWatchdog(status, finalizeTimeout, afterFailures ? "process failures" : "the run's end");
    io::stopAliveBeacon();
    if (summary.stopped != train::TrainSummary::Stop::Finished) {
        io::writeEndRecord(status, summary.stopped == train::TrainSummary::Stop::BeyondF
                                       ? "requeue: a failure beyond what the layout tolerates"
                                   : summary.stopped == train::TrainSummary::Stop::Numerics
                                       ? "stopped: a step's numbers that its rerun repeats (the data or the model)"
                                       : "requeue: stop requested (time limit ahead)",
                         summary.nodeFailures);
        return status;
    }
    io::writeEndRecord(0, fmt::format("finished: steps {} to {}", summary.firstStep, summary.lastStep), summary.nodeFailures);
    log::info("kiln run: steps {} to {} in {:.1f} s ({:.1f}k tokens/s), loss {:.4f} -> {:.4f}; diagnostics in {}",
              summary.firstStep, summary.lastStep, summary.seconds, summary.tokensPerSecond / 1e3, summary.firstLoss,
              summary.lastLoss, (runDir / "diag.h5").string());
    return 0;
}

// A process the running job started to admit a node (see comm/spawn.hpp):
// it gets ready while the job trains, joins the job's world at a step
// boundary, takes the run's state and trains as a member.
// Its errors end it alone (an abort would take the job with it): the job
// sees a failed process and retires the new node.
int joinRunningJob(const config::Deck& deck) {
    log::speakForJob(false);
    try {
        comm::JoinerLink link;
        comm::World world(comm::World::NotJoinedYet{});
        train::Trainer trainer(deck, world, link);
        return finishRun(trainer.run(), std::filesystem::path(deck.text("run.out_dir")) / deck.text("run.name"),
                         deck.real("fault.finalize_timeout_s"));
    } catch (const std::exception& e) {
        std::fprintf(stderr, "kiln: error on rank %d (%s), a process admitted into a running job: %s\n", log::rank(),
                     log::host().c_str(), e.what());
        std::fflush(stderr);
        std::raise(SIGKILL);  // as a failed node ends (see report_error.cpp)
        return 1;
    }
}

}  // namespace

int runMain(int argc, char** argv) {
    po::options_description options("kiln run");
    std::string deckPath;
    std::vector<std::string> overrides;
    options.add_options()
        ("deck", po::value<std::string>(&deckPath)->required(), "the input deck (INI)")
        ("set", po::value<std::vector<std::string>>(&overrides)->composing(), "override a key: --set section.key=value");
    po::positional_options_description positional;
    positional.add("deck", 1);
    po::variables_map values;
    if (!parseCommandLine(argc, argv, "mpirun [--with-ft ulfm] -n N kiln run DECK [--set k=v ...]", options, positional,
                          values))
        return 0;

    // The deck first: what it says about failure detection must be set before MPI starts.
    base::startupPhase("load");  // the process and its libraries (libtorch, MPI, HDF5)
    auto deck = config::Deck::fromFile(deckPath, overrides);
    const double hangTimeout = deck.real("fault.hang_timeout_s");
    watchStopSignal();  // before MPI starts: a signal during start-up is kept for the first step
    base::startupPhase("deck");
    comm::setWaitMode(comm::waitModeNamed(deck.text("cluster.waits")));  // before MPI starts: it asks Open MPI to yield
    comm::MpiSession mpi(&argc, &argv, hangTimeout);
    base::startupPhase("mpi_init");
    if (comm::spawnedIntoJob()) return joinRunningJob(deck);
    comm::World world(static_cast<int>(deck.integer("cluster.ranks_per_node")));
    // The launcher's sign that a speaker lives: silent longer than any recovery may take, the job is hung.
    io::startAliveBeacon(std::max(600.0, 3.0 * deck.real("fault.step_timeout_s")) + 4.0 * hangTimeout);
    reportWorld(world, deck);
    checkDeckAgainstWorld(world, deck);

    const std::filesystem::path runDir = std::filesystem::path(deck.text("run.out_dir")) / deck.text("run.name");
    const WorldCheck check = checkControlCommunicator(world);
    log::info("  world      control communicator answers: {} ranks, sum of ranks {} (expected {})", check.ranks,
              check.sumOfRanks, check.expectedSum);
    if (!check.ok()) throw Error("the control communicator gave a wrong all-reduce result", ErrorScope::AllRanks);
    base::startupPhase("world");
    train::Trainer trainer(deck, world);
    // Written once the trainer has settled what the deck leaves to the run (e.g. a kept LR horizon).
    if (world.rank() == 0) io::writeFileAtomically(runDir / "deck.resolved.ini", deck.resolvedText() + trainer.notes());
    log::info("  resolved   {}", (runDir / "deck.resolved.ini").string());
    return finishRun(trainer.run(), runDir, deck.real("fault.finalize_timeout_s"));
}

}  // namespace kiln::apps
