// diag.h5, the run's diagnostics, written by rank 0 in HDF5's single-writer /
// multiple-reader mode: readable with h5dump or h5py while the run goes on,
// and consistent after a crash at any instant (everything up to the last
// flush, which happens after every step).
//
//   /config         the resolved deck (string)
//   /steps          step, loss, lr, grad_norm, tokens, step_time, data_wait, forward, backward,
//                   sync, optimizer, pipeline_wait, time, mfu, hfu, peak_memory (one record per step;
//                   times in seconds, rank 0's)
//   /templates      the pipeline templates of this run, one record per stage: template_nodes,
//                   stage, node, rank_in_node, first_layer, end_layer, time_s (per microbatch),
//                   sync_s (per step), memory_bytes
//   /instantiations one record per instantiation the run used: step (its first), time, pipelines,
//                   nodes_used, nodes_idle, pinned, predicted_step_s, layout ("2:5+1:3", nodes and
//                   microbatches of each pipeline), ranks (start-up ranks of each pipeline's stages,
//                   "0,1,2,3|4,5"), tolerance (simultaneous node failures it survives), spares
//   /source_tokens  (steps, sources) target tokens per source; attribute `sources`
//   /failures       one record per recovery: step, time, failed_ranks, retired_nodes (start-up
//                   numbering, comma-separated), rounds (recoveries it took), and seconds of each
//                   phase: detect (from the start of the failed attempt to its abandon), revoke,
//                   shrink (which agrees on the failed set), regroup (retiring nodes, the new
//                   control communicator), instantiate (choosing the layout), migrate (layers and
//                   moments, until all agree), rebuild (pipeline and gradient communicators),
//                   replay (the replayed step); bytes_migrated (all ranks), layout ("2:2+1:2")
//   /eval           one record per held-out evaluation: step (the steps trained before it), loss
//                   (mean cross-entropy per token), perplexity, tokens, seconds, time
//   /events         time, step, kind, detail; the kinds are diag_schema.hpp's diagEventKinds()
//   /router_balance (steps, blocks) a mixture of experts' load-balancing loss per block, the mean over the
//                   step's sequences (1: balanced); only for a model with experts, as the next two
//   /router_z       (steps, blocks) the router z-loss per block, the mean over the step's tokens
//   /expert_load    (steps, blocks x experts) tokens each expert of each block received (k per token);
//                   attributes `blocks` and `experts`
//
// Every column's meaning: diag_schema.hpp (and docs/reference/diag.md, printed from it).
#pragma once

#include "kiln/io/hdf5.hpp"

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kiln::io {

struct StepRecord {
    std::uint64_t step = 0;
    double loss = 0.0;
    double lr = 0.0;
    double gradNorm = 0.0;
    std::uint64_t tokens = 0;
    double stepTime = 0.0;
    double dataWait = 0.0;
    double forward = 0.0;    // seconds in forward passes (and the loss)
    double backward = 0.0;   // seconds in backward passes
    double sync = 0.0;       // seconds summing gradients over replicas, and clipping
    double optimizer = 0.0;  // seconds in the optimizer update
    double pipelineWait = 0.0;  // seconds waiting for neighbouring stages (the bubble) and pending sends
    double time = 0.0;          // seconds since the Unix epoch when the step was recorded (0 in older files)
    double mfu = 0.0;           // model FLOPs utilization (0: no peak known; train.peak_tflops)
    double hfu = 0.0;           // hardware FLOPs utilization: recomputation counted
    double peakMemory = 0.0;    // bytes, the most of any rank (a GPU's allocator peak, else the resident set's)
};

// A step's routers (a mixture of experts): per block the balance loss and z-loss, and blocks x experts loads.
struct RouterRow {
    std::vector<double> balance, z, load;
};

// The shape of a run's routers (both 0 for a dense model: no router tables).
struct RouterShape {
    std::uint32_t blocks = 0, experts = 0;
};

struct EvalRecord {
    std::uint64_t step = 0;  // steps trained before it
    double loss = 0.0, perplexity = 0.0;
    std::uint64_t tokens = 0;
    double seconds = 0.0;
    double time = 0.0;  // seconds since the Unix epoch
};

struct TemplateStageRecord {
    std::uint32_t templateNodes = 0, stage = 0, node = 0, rankInNode = 0, firstLayer = 0, endLayer = 0;
    double time = 0.0, sync = 0.0, memory = 0.0;
};

struct FailureRecord {
    std::uint64_t step = 0;
    double time = 0.0;  // seconds since the Unix epoch
    char failedRanks[128] = {};
    char retiredNodes[64] = {};
    std::uint32_t rounds = 0;
    double detect = 0.0, revoke = 0.0, shrink = 0.0, regroup = 0.0, instantiate = 0.0, migrate = 0.0, rebuild = 0.0,
           replay = 0.0;
    std::uint64_t bytesMigrated = 0;
    char layout[128] = {};
    // What failed: "process" (ULFM saw ranks end), "hang" (the heartbeat or a deadline declared them),
    // "launch" (the launcher ended the job without kiln's end record: a host lost whole), "corruption".
    // Rows of files written before this field read back as "".
    char cause[32] = {};
};

struct InstantiationRecord {
    std::uint64_t step = 0;
    double time = 0.0;  // seconds since the Unix epoch
    std::uint32_t pipelines = 0, nodesUsed = 0, nodesIdle = 0, pinned = 0;
    double predictedStepTime = 0.0;
    std::uint32_t tolerance = 0;  // simultaneous node failures this layout survives (pipelines - 1)
    std::uint32_t spares = 0;     // of the idle nodes, those kept in reserve (cluster.spare_nodes)
    char layout[128] = {};
    char ranks[512] = {};
};

struct EventRecord {
    double time = 0.0;  // seconds since the Unix epoch
    std::uint64_t step = 0;
    char kind[32] = {};
    char detail[512] = {};  // older files hold 224: HDF5 converts either way
};

// Copies `text` into a record's fixed-size text field (`size` bytes with the
// terminating zero). Text that does not fit keeps its start and ends in
// "...[+N]", N the characters cut: a field is never cut silently.
void fitText(char* field, std::size_t size, const std::string& text);
template <std::size_t N>
void fitText(char (&field)[N], const std::string& text) {
    fitText(field, N, text);
}

// Opens a diag.h5 for reading, also while its run writes it or after the run was killed.
h5::Handle openDiagForReading(const std::string& path);

class DiagFile {
public:
    // Creates `path`, or continues it when `continueRun` and it exists. A fresh run
    // never overwrites an old diag.h5: it is moved aside (diag.h5.<ms since epoch>).
    DiagFile(const std::string& path, const std::string& deckText, const std::vector<std::string>& sources,
             const std::vector<TemplateStageRecord>& templates, bool continueRun, RouterShape router = {});
    ~DiagFile();
    DiagFile(const DiagFile&) = delete;
    DiagFile& operator=(const DiagFile&) = delete;

    void step(const StepRecord& record, const std::vector<std::uint64_t>& sourceTokens, const RouterRow& router = {});
    // The last step recorded in /steps (of this run and those it continues), if any.
    std::optional<std::uint64_t> lastStep() const { return lastStep_; }
    void event(std::uint64_t step, const std::string& kind, const std::string& detail);
    void instantiation(const InstantiationRecord& record);
    void failure(const FailureRecord& record);
    // Row `row` of /failures says `cause` instead (a requeued attempt's finding about the lost one's rows).
    void setFailureCause(std::size_t row, const std::string& cause);
    void evaluation(const EvalRecord& record);
    // What this file holds so far (of this run and those it continues).
    std::vector<FailureRecord> failures() const { return readFailures(file_); }
    std::vector<EventRecord> events() const { return readEvents(file_); }

    static std::vector<StepRecord> readSteps(hid_t file);
    static std::vector<EventRecord> readEvents(hid_t file);
    static std::vector<InstantiationRecord> readInstantiations(hid_t file);
    static std::vector<FailureRecord> readFailures(hid_t file);
    static std::vector<EvalRecord> readEvals(hid_t file);
    static std::vector<TemplateStageRecord> readTemplates(hid_t file);
    static std::vector<std::vector<std::uint64_t>> readSourceTokens(hid_t file, std::vector<std::string>& sources);
    // The router tables' rows (none in a dense run's file), and their shape.
    static std::vector<RouterRow> readRouter(hid_t file, RouterShape& shape);

private:
    void appendRouter(const RouterRow& row);
    // Appends `rows` rows, each a record (columns == 0) or `columns` values.
    void append(hid_t dataset, hid_t memType, const void* records, std::uint64_t columns = 0, std::uint64_t rows = 1);

    std::string path_;
    std::size_t sources_ = 0;
    std::optional<std::uint64_t> lastStep_;
    RouterShape router_;
    h5::Handle routerBalance_, routerZ_, expertLoad_;
    h5::Handle file_, steps_, sourceTokens_, events_, instantiations_, failures_, evals_, stepType_, eventType_,
        instantiationType_, failureType_, evalType_;
};

}  // namespace kiln::io
