#include "kiln/io/diag_schema.hpp"

#include "kiln/io/diag_file.hpp"

#include <map>
#include <stdexcept>

namespace kiln::io {

const h5::Record<StepRecord>& stepRecord() {
    static const auto record = h5::Record<StepRecord>()
                                   .field("step", &StepRecord::step)
                                   .field("loss", &StepRecord::loss)
                                   .field("lr", &StepRecord::lr)
                                   .field("grad_norm", &StepRecord::gradNorm)
                                   .field("tokens", &StepRecord::tokens)
                                   .field("step_time", &StepRecord::stepTime)
                                   .field("data_wait", &StepRecord::dataWait)
                                   .field("forward", &StepRecord::forward)
                                   .field("backward", &StepRecord::backward)
                                   .field("sync", &StepRecord::sync)
                                   .field("optimizer", &StepRecord::optimizer)
                                   .field("pipeline_wait", &StepRecord::pipelineWait)
                                   .field("time", &StepRecord::time)
                                   .field("mfu", &StepRecord::mfu)
                                   .field("hfu", &StepRecord::hfu)
                                   .field("peak_memory", &StepRecord::peakMemory);
    return record;
}

const h5::Record<TemplateStageRecord>& templateRecord() {
    static const auto record = h5::Record<TemplateStageRecord>()
                                   .field("template_nodes", &TemplateStageRecord::templateNodes)
                                   .field("stage", &TemplateStageRecord::stage)
                                   .field("node", &TemplateStageRecord::node)
                                   .field("rank_in_node", &TemplateStageRecord::rankInNode)
                                   .field("first_layer", &TemplateStageRecord::firstLayer)
                                   .field("end_layer", &TemplateStageRecord::endLayer)
                                   .field("time_s", &TemplateStageRecord::time)
                                   .field("sync_s", &TemplateStageRecord::sync)
                                   .field("memory_bytes", &TemplateStageRecord::memory);
    return record;
}

const h5::Record<FailureRecord>& failureRecord() {
    static const auto record = h5::Record<FailureRecord>()
                                   .field("step", &FailureRecord::step)
                                   .field("time", &FailureRecord::time)
                                   .field("failed_ranks", &FailureRecord::failedRanks)
                                   .field("retired_nodes", &FailureRecord::retiredNodes)
                                   .field("rounds", &FailureRecord::rounds)
                                   .field("detect_s", &FailureRecord::detect)
                                   .field("revoke_s", &FailureRecord::revoke)
                                   .field("shrink_s", &FailureRecord::shrink)
                                   .field("regroup_s", &FailureRecord::regroup)
                                   .field("instantiate_s", &FailureRecord::instantiate)
                                   .field("migrate_s", &FailureRecord::migrate)
                                   .field("rebuild_s", &FailureRecord::rebuild)
                                   .field("replay_s", &FailureRecord::replay)
                                   .field("bytes_migrated", &FailureRecord::bytesMigrated)
                                   .field("layout", &FailureRecord::layout)
                                   .field("cause", &FailureRecord::cause);
    return record;
}

const h5::Record<InstantiationRecord>& instantiationRecord() {
    static const auto record = h5::Record<InstantiationRecord>()
                                   .field("step", &InstantiationRecord::step)
                                   .field("time", &InstantiationRecord::time)
                                   .field("pipelines", &InstantiationRecord::pipelines)
                                   .field("nodes_used", &InstantiationRecord::nodesUsed)
                                   .field("nodes_idle", &InstantiationRecord::nodesIdle)
                                   .field("pinned", &InstantiationRecord::pinned)
                                   .field("predicted_step_s", &InstantiationRecord::predictedStepTime)
                                   .field("layout", &InstantiationRecord::layout)
                                   .field("ranks", &InstantiationRecord::ranks)
                                   .field("tolerance", &InstantiationRecord::tolerance)
                                   .field("spares", &InstantiationRecord::spares);
    return record;
}

const h5::Record<EvalRecord>& evalRecord() {
    static const auto record = h5::Record<EvalRecord>()
                                   .field("step", &EvalRecord::step)
                                   .field("loss", &EvalRecord::loss)
                                   .field("perplexity", &EvalRecord::perplexity)
                                   .field("tokens", &EvalRecord::tokens)
                                   .field("seconds", &EvalRecord::seconds)
                                   .field("time", &EvalRecord::time);
    return record;
}

const h5::Record<EventRecord>& eventRecord() {
    static const auto record = h5::Record<EventRecord>()
                                   .field("time", &EventRecord::time)
                                   .field("step", &EventRecord::step)
                                   .field("kind", &EventRecord::kind)
                                   .field("detail", &EventRecord::detail);
    return record;
}

namespace {

const std::map<std::string, std::string>& columnMeanings() {
    static const std::map<std::string, std::string> meanings = {
        {"steps/step", "the step (from 1)"},
        {"steps/loss", "mean cross-entropy per token of the global batch"},
        {"steps/lr", "learning rate used by the step"},
        {"steps/grad_norm", "global gradient norm before clipping"},
        {"steps/tokens", "tokens in the global batch"},
        {"steps/step_time", "seconds of the step on rank 0"},
        {"steps/data_wait", "seconds rank 0 waited for the loader"},
        {"steps/forward", "seconds in forward passes and the loss"},
        {"steps/backward", "seconds in backward passes"},
        {"steps/sync", "seconds summing gradients over the replicas, and clipping"},
        {"steps/optimizer", "seconds in the optimizer update"},
        {"steps/pipeline_wait", "seconds waiting for neighbouring stages (the bubble) and pending sends"},
        {"steps/time", "seconds since the Unix epoch when the step was recorded (0 in files written before it)"},
        {"steps/mfu", "model FLOPs utilization: the model's FLOPs per token (3 x the forward) x tokens/s over every live "
                      "rank's peak (train.peak_tflops); 0 when no peak is known"},
        {"steps/hfu", "hardware FLOPs utilization: the same with the forward that recomputation runs again"},
        {"steps/peak_memory", "bytes, the most of any rank: a GPU's allocator peak since the model was built, on the "
                              "CPU the process's peak resident set"},
        {"templates/template_nodes", "the node count the template is for"},
        {"templates/stage", "the stage's index in the pipeline"},
        {"templates/node", "the node of the pipeline that runs the stage"},
        {"templates/rank_in_node", "the first rank of the node that runs it"},
        {"templates/first_layer", "the stage's first layer"},
        {"templates/end_layer", "one past its last layer"},
        {"templates/time_s", "planned seconds per microbatch"},
        {"templates/sync_s", "planned seconds of gradient sums per step"},
        {"templates/memory_bytes", "planned memory of a rank of the stage"},
        {"instantiations/step", "the first step the layout ran"},
        {"instantiations/time", "seconds since the Unix epoch"},
        {"instantiations/pipelines", "pipeline replicas"},
        {"instantiations/nodes_used", "nodes in the pipelines"},
        {"instantiations/nodes_idle", "nodes without a stage (spares and leftovers)"},
        {"instantiations/pinned", "1 when the deck pinned the layout (plan.pipelines)"},
        {"instantiations/predicted_step_s", "the planner's step time for the layout"},
        {"instantiations/layout", "nodes and microbatches of each pipeline, \"2:5+1:3\""},
        {"instantiations/ranks", "start-up ranks of each pipeline's stages, \"0,1,2,3|4,5\""},
        {"instantiations/tolerance", "simultaneous node failures the layout survives"},
        {"instantiations/spares", "idle nodes kept in reserve (cluster.spare_nodes)"},
        {"failures/step", "the step the failure interrupted (it is replayed)"},
        {"failures/time", "seconds since the Unix epoch"},
        {"failures/failed_ranks", "start-up ranks lost, comma-separated"},
        {"failures/retired_nodes", "start-up node numbers retired, comma-separated"},
        {"failures/rounds", "recoveries it took (a failure inside a recovery adds one)"},
        {"failures/detect_s", "from the start of the failed attempt to its abandon"},
        {"failures/revoke_s", "revoking the communicators"},
        {"failures/shrink_s", "the shrink, which agrees on the failed set"},
        {"failures/regroup_s", "retiring nodes, the new control communicator"},
        {"failures/instantiate_s", "choosing the layout"},
        {"failures/migrate_s", "copying layers and moments, until all agree"},
        {"failures/rebuild_s", "pipeline and gradient communicators"},
        {"failures/replay_s", "the replayed step"},
        {"failures/bytes_migrated", "bytes of layers and moments copied (all ranks)"},
        {"failures/layout", "the layout after the recovery, \"2:2+1:2\""},
        {"failures/cause", "process (ranks ended and the survivors recovered); launch (the launcher ended the job: a host "
                           "lost whole) or deadline (kiln ended the job: peers silent past every deadline, a host "
                           "without power or cut off), both recorded by the requeued run; corruption (the survivors "
                           "retired a node whose numbers a rerun of the step did not repeat: silent corruption); "
                           "teardown (ranks on a host that lived, ended by Open MPI's runtime after it lost another "
                           "host's daemon: marked so by the requeued run, from the lost host the launcher named)"},
        {"eval/step", "steps trained before the evaluation"},
        {"eval/loss", "mean cross-entropy per held-out token"},
        {"eval/perplexity", "exp(loss)"},
        {"eval/tokens", "held-out tokens evaluated"},
        {"eval/seconds", "seconds the evaluation took"},
        {"eval/time", "seconds since the Unix epoch"},
        {"events/time", "seconds since the Unix epoch"},
        {"events/step", "the step at which it happened"},
        {"events/kind", "one of the event kinds below"},
        {"events/detail", "what happened, in words (cut with \"...[+N]\" past 511 characters)"},
    };
    return meanings;
}

DiagTable recordTable(const std::string& name, const std::string& meaning, const std::vector<std::string>& columns) {
    DiagTable table{name, meaning, {}};
    const auto& meanings = columnMeanings();
    for (const auto& column : columns) {
        const auto found = meanings.find(name + "/" + column);
        if (found == meanings.end())
            throw std::logic_error("diag.h5 column " + name + "/" + column + " has no meaning in diag_schema.cpp");
        table.columns.push_back({column, found->second});
    }
    return table;
}

}  // namespace

std::vector<DiagTable> diagTables() {
    std::vector<DiagTable> tables = {
        {"config", "the resolved deck, as text", {}},
        recordTable("steps", "one record per step", stepRecord().names()),
        {"source_tokens", "(steps, sources) tokens of each source in each step's batch; attribute `sources` names the "
                          "columns",
         {}},
        recordTable("templates", "the pipeline templates of the run, one record per stage", templateRecord().names()),
        recordTable("instantiations", "one record per layout the run used", instantiationRecord().names()),
        recordTable("failures", "one record per recovery, with the seconds of each phase", failureRecord().names()),
        recordTable("eval", "one record per held-out evaluation", evalRecord().names()),
        recordTable("events", "what happened besides steps, one record each", eventRecord().names()),
        {"router_balance", "(steps, blocks) a mixture of experts' load-balancing loss per block, the mean over the "
                           "step's sequences (1: balanced); only in a run with experts, as the next two",
         {}},
        {"router_z", "(steps, blocks) the router z-loss per block, the mean over the step's tokens", {}},
        {"expert_load", "(steps, blocks x experts) the tokens each expert of each block received (experts_per_token "
                        "per token); attributes `blocks` and `experts`",
         {}},
    };
    std::size_t columns = 0;
    for (const auto& t : tables) columns += t.columns.size();
    if (columns != columnMeanings().size())
        throw std::logic_error("diag_schema.cpp gives meanings to columns diag.h5 does not have");
    return tables;
}

const std::vector<DiagEventKind>& diagEventKinds() {
    static const std::vector<DiagEventKind> kinds = {
        {"start", "a run started: its nodes, ranks and layout"},
        {"resume", "a run resumed from a checkpoint: which, and at what step"},
        {"takeover", "a requeued job continued a diag.h5 whose writer was killed"},
        {"earlier_attempt", "a run that started afresh (no checkpoint): where the earlier attempt's diag.h5 went, and "
                            "how many of its /failures rows were copied here"},
        {"startup", "seconds of each start-up phase (MPI, data, plan, model, first step)"},
        {"spares", "nodes kept idle in reserve, and why"},
        {"fault_f", "fault.f lowered to what the nodes allow, and why"},
        {"checkpoint", "a checkpoint written: its directory and how (background, at stop, on failure)"},
        {"failure", "nodes lost and the layout the survivors regrouped into"},
        {"launch_lost", "the previous attempt ended without kiln's end record (the launcher lost a host whole) or "
                        "was ended by kiln at a deadline: the host and the words; the requeued run records it"},
        {"hosts", "each node's host at the start of an attempt (node 0 first), for telling a lost host's teardown from "
                  "failures later"},
        {"lost_host", "the launcher named a lost host that the requeued attempt runs on again (Open MPI's runtime names "
                      "the first daemon it lost contact with): the hosts taken as lost instead"},
        {"teardown", "rows of the lost attempt that the requeued run marked as Open MPI's teardown after a host was "
                     "lost, not failures"},
        {"straggler", "a slow node retired from the pipelines, and the new layout"},
        {"replicas", "the holders of every layer shard compared fingerprints of their copies (numerics.compare_every, "
                     "before checkpoints): whether they agree, and which ranks were outvoted"},
        {"numerics", "a step whose loss or gradient norm was not finite or spiked (numerics.*), and what its rerun "
                     "showed: a node retired (silent corruption), the batch skipped, a stop, or a fault in the sums"},
        {"return", "a retired straggler's node back in the pipelines"},
        {"tolerance", "the failures the layout now survives, when it changes"},
        {"rebalance", "the batch split changed to follow the measured speeds"},
        {"speed", "a node slower than planned, kept (not worth a new layout)"},
        {"admit", "nodes admitted into the running job, or an admission refused"},
        {"stop", "the run stopped early: time limit, signal, more failures than f; with the checkpoint"},
        {"speeds", "at the end: each rank's measured compute against the plan"},
        {"memory", "at the end: each rank's memory against the plan"},
        {"end", "the run ended: steps, tokens, seconds"},
        {"survivors", "when the run stops (finished, beyond f, on request): the start-up ranks still in the job, "
                      "as ranges (0-1,4-7); those missing ended (fault tests compare them with their victims)"},
    };
    return kinds;
}

bool isDiagEventKind(const std::string& kind) {
    for (const auto& k : diagEventKinds())
        if (k.name == kind) return true;
    return false;
}

}  // namespace kiln::io
