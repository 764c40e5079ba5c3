#include "kiln/io/diag_schema.hpp"

#include "kiln/io/diag_file.hpp"

#include <hdf5.h>

#include <map>
#include <stdexcept>

namespace kiln::io {

h5::Handle stepRecordType() {
    h5::Handle t(KILN_H5(H5Tcreate(H5T_COMPOUND, sizeof(StepRecord)), "diag"));
    KILN_H5(H5Tinsert(t, "step", HOFFSET(StepRecord, step), H5T_NATIVE_UINT64), "diag");
    KILN_H5(H5Tinsert(t, "loss", HOFFSET(StepRecord, loss), H5T_NATIVE_DOUBLE), "diag");
    KILN_H5(H5Tinsert(t, "lr", HOFFSET(StepRecord, lr), H5T_NATIVE_DOUBLE), "diag");
    KILN_H5(H5Tinsert(t, "grad_norm", HOFFSET(StepRecord, gradNorm), H5T_NATIVE_DOUBLE), "diag");
    KILN_H5(H5Tinsert(t, "tokens", HOFFSET(StepRecord, tokens), H5T_NATIVE_UINT64), "diag");
    KILN_H5(H5Tinsert(t, "step_time", HOFFSET(StepRecord, stepTime), H5T_NATIVE_DOUBLE), "diag");
    KILN_H5(H5Tinsert(t, "data_wait", HOFFSET(StepRecord, dataWait), H5T_NATIVE_DOUBLE), "diag");
    KILN_H5(H5Tinsert(t, "forward", HOFFSET(StepRecord, forward), H5T_NATIVE_DOUBLE), "diag");
    KILN_H5(H5Tinsert(t, "backward", HOFFSET(StepRecord, backward), H5T_NATIVE_DOUBLE), "diag");
    KILN_H5(H5Tinsert(t, "sync", HOFFSET(StepRecord, sync), H5T_NATIVE_DOUBLE), "diag");
    KILN_H5(H5Tinsert(t, "optimizer", HOFFSET(StepRecord, optimizer), H5T_NATIVE_DOUBLE), "diag");
    KILN_H5(H5Tinsert(t, "pipeline_wait", HOFFSET(StepRecord, pipelineWait), H5T_NATIVE_DOUBLE), "diag");
    return t;
}

h5::Handle templateRecordType() {
    h5::Handle t(KILN_H5(H5Tcreate(H5T_COMPOUND, sizeof(TemplateStageRecord)), "diag"));
    KILN_H5(H5Tinsert(t, "template_nodes", HOFFSET(TemplateStageRecord, templateNodes), H5T_NATIVE_UINT32), "diag");
    KILN_H5(H5Tinsert(t, "stage", HOFFSET(TemplateStageRecord, stage), H5T_NATIVE_UINT32), "diag");
    KILN_H5(H5Tinsert(t, "node", HOFFSET(TemplateStageRecord, node), H5T_NATIVE_UINT32), "diag");
    KILN_H5(H5Tinsert(t, "rank_in_node", HOFFSET(TemplateStageRecord, rankInNode), H5T_NATIVE_UINT32), "diag");
    KILN_H5(H5Tinsert(t, "first_layer", HOFFSET(TemplateStageRecord, firstLayer), H5T_NATIVE_UINT32), "diag");
    KILN_H5(H5Tinsert(t, "end_layer", HOFFSET(TemplateStageRecord, endLayer), H5T_NATIVE_UINT32), "diag");
    KILN_H5(H5Tinsert(t, "time_s", HOFFSET(TemplateStageRecord, time), H5T_NATIVE_DOUBLE), "diag");
    KILN_H5(H5Tinsert(t, "sync_s", HOFFSET(TemplateStageRecord, sync), H5T_NATIVE_DOUBLE), "diag");
    KILN_H5(H5Tinsert(t, "memory_bytes", HOFFSET(TemplateStageRecord, memory), H5T_NATIVE_DOUBLE), "diag");
    return t;
}

h5::Handle failureRecordType() {
    h5::Handle t(KILN_H5(H5Tcreate(H5T_COMPOUND, sizeof(FailureRecord)), "diag"));
    const auto ranks = h5::fixedString(sizeof(FailureRecord::failedRanks), "diag");
    const auto nodes = h5::fixedString(sizeof(FailureRecord::retiredNodes), "diag");
    const auto layout = h5::fixedString(sizeof(FailureRecord::layout), "diag");
    KILN_H5(H5Tinsert(t, "step", HOFFSET(FailureRecord, step), H5T_NATIVE_UINT64), "diag");
    KILN_H5(H5Tinsert(t, "time", HOFFSET(FailureRecord, time), H5T_NATIVE_DOUBLE), "diag");
    KILN_H5(H5Tinsert(t, "failed_ranks", HOFFSET(FailureRecord, failedRanks), ranks), "diag");
    KILN_H5(H5Tinsert(t, "retired_nodes", HOFFSET(FailureRecord, retiredNodes), nodes), "diag");
    KILN_H5(H5Tinsert(t, "rounds", HOFFSET(FailureRecord, rounds), H5T_NATIVE_UINT32), "diag");
    const std::pair<const char*, std::size_t> phases[] = {
        {"detect_s", HOFFSET(FailureRecord, detect)},       {"revoke_s", HOFFSET(FailureRecord, revoke)},
        {"shrink_s", HOFFSET(FailureRecord, shrink)},       {"regroup_s", HOFFSET(FailureRecord, regroup)},
        {"instantiate_s", HOFFSET(FailureRecord, instantiate)}, {"migrate_s", HOFFSET(FailureRecord, migrate)},
        {"rebuild_s", HOFFSET(FailureRecord, rebuild)},     {"replay_s", HOFFSET(FailureRecord, replay)}};
    for (const auto& [name, offset] : phases) KILN_H5(H5Tinsert(t, name, offset, H5T_NATIVE_DOUBLE), "diag");
    KILN_H5(H5Tinsert(t, "bytes_migrated", HOFFSET(FailureRecord, bytesMigrated), H5T_NATIVE_UINT64), "diag");
    KILN_H5(H5Tinsert(t, "layout", HOFFSET(FailureRecord, layout), layout), "diag");
    return t;
}

h5::Handle instantiationRecordType() {
    h5::Handle t(KILN_H5(H5Tcreate(H5T_COMPOUND, sizeof(InstantiationRecord)), "diag"));
    const auto layout = h5::fixedString(sizeof(InstantiationRecord::layout), "diag");
    const auto ranks = h5::fixedString(sizeof(InstantiationRecord::ranks), "diag");
    KILN_H5(H5Tinsert(t, "step", HOFFSET(InstantiationRecord, step), H5T_NATIVE_UINT64), "diag");
    KILN_H5(H5Tinsert(t, "time", HOFFSET(InstantiationRecord, time), H5T_NATIVE_DOUBLE), "diag");
    KILN_H5(H5Tinsert(t, "pipelines", HOFFSET(InstantiationRecord, pipelines), H5T_NATIVE_UINT32), "diag");
    KILN_H5(H5Tinsert(t, "nodes_used", HOFFSET(InstantiationRecord, nodesUsed), H5T_NATIVE_UINT32), "diag");
    KILN_H5(H5Tinsert(t, "nodes_idle", HOFFSET(InstantiationRecord, nodesIdle), H5T_NATIVE_UINT32), "diag");
    KILN_H5(H5Tinsert(t, "pinned", HOFFSET(InstantiationRecord, pinned), H5T_NATIVE_UINT32), "diag");
    KILN_H5(H5Tinsert(t, "predicted_step_s", HOFFSET(InstantiationRecord, predictedStepTime), H5T_NATIVE_DOUBLE), "diag");
    KILN_H5(H5Tinsert(t, "layout", HOFFSET(InstantiationRecord, layout), layout), "diag");
    KILN_H5(H5Tinsert(t, "ranks", HOFFSET(InstantiationRecord, ranks), ranks), "diag");
    KILN_H5(H5Tinsert(t, "tolerance", HOFFSET(InstantiationRecord, tolerance), H5T_NATIVE_UINT32), "diag");
    KILN_H5(H5Tinsert(t, "spares", HOFFSET(InstantiationRecord, spares), H5T_NATIVE_UINT32), "diag");
    return t;
}

h5::Handle evalRecordType() {
    h5::Handle t(KILN_H5(H5Tcreate(H5T_COMPOUND, sizeof(EvalRecord)), "diag"));
    KILN_H5(H5Tinsert(t, "step", HOFFSET(EvalRecord, step), H5T_NATIVE_UINT64), "diag");
    KILN_H5(H5Tinsert(t, "loss", HOFFSET(EvalRecord, loss), H5T_NATIVE_DOUBLE), "diag");
    KILN_H5(H5Tinsert(t, "perplexity", HOFFSET(EvalRecord, perplexity), H5T_NATIVE_DOUBLE), "diag");
    KILN_H5(H5Tinsert(t, "tokens", HOFFSET(EvalRecord, tokens), H5T_NATIVE_UINT64), "diag");
    KILN_H5(H5Tinsert(t, "seconds", HOFFSET(EvalRecord, seconds), H5T_NATIVE_DOUBLE), "diag");
    KILN_H5(H5Tinsert(t, "time", HOFFSET(EvalRecord, time), H5T_NATIVE_DOUBLE), "diag");
    return t;
}

h5::Handle eventRecordType() {
    h5::Handle t(KILN_H5(H5Tcreate(H5T_COMPOUND, sizeof(EventRecord)), "diag"));
    const auto kind = h5::fixedString(sizeof(EventRecord::kind), "diag");
    const auto detail = h5::fixedString(sizeof(EventRecord::detail), "diag");
    KILN_H5(H5Tinsert(t, "time", HOFFSET(EventRecord, time), H5T_NATIVE_DOUBLE), "diag");
    KILN_H5(H5Tinsert(t, "step", HOFFSET(EventRecord, step), H5T_NATIVE_UINT64), "diag");
    KILN_H5(H5Tinsert(t, "kind", HOFFSET(EventRecord, kind), kind), "diag");
    KILN_H5(H5Tinsert(t, "detail", HOFFSET(EventRecord, detail), detail), "diag");
    return t;
}

namespace {

std::vector<std::string> memberNames(hid_t type) {
    std::vector<std::string> names;
    const int n = H5Tget_nmembers(type);
    for (int i = 0; i < n; ++i) {
        char* name = H5Tget_member_name(type, static_cast<unsigned>(i));
        names.emplace_back(name);
        H5free_memory(name);
    }
    return names;
}

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

DiagTable recordTable(const std::string& name, const std::string& meaning, hid_t type) {
    DiagTable table{name, meaning, {}};
    const auto& meanings = columnMeanings();
    for (const auto& column : memberNames(type)) {
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
        recordTable("steps", "one record per step", stepRecordType()),
        {"source_tokens", "(steps, sources) tokens of each source in each step's batch; attribute `sources` names the "
                          "columns",
         {}},
        recordTable("templates", "the pipeline templates of the run, one record per stage", templateRecordType()),
        recordTable("instantiations", "one record per layout the run used", instantiationRecordType()),
        recordTable("failures", "one record per recovery, with the seconds of each phase", failureRecordType()),
        recordTable("eval", "one record per held-out evaluation", evalRecordType()),
        recordTable("events", "what happened besides steps, one record each", eventRecordType()),
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
        {"startup", "seconds of each start-up phase (MPI, data, plan, model, first step)"},
        {"spares", "nodes kept idle in reserve, and why"},
        {"fault_f", "fault.f lowered to what the nodes allow, and why"},
        {"checkpoint", "a checkpoint written: its directory and how (background, at stop, on failure)"},
        {"failure", "nodes lost and the layout the survivors regrouped into"},
        {"straggler", "a slow node retired from the pipelines, and the new layout"},
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
