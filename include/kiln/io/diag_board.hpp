// diag.h5's records as TensorBoard scalars and text: what `kiln run` writes
// beside diag.h5 as it goes (tensorboard.enabled) and what `kiln diag
// --tensorboard` writes from a diag.h5 afterwards, tag for tag the same.
//
//   train/   loss, lr, grad_norm, tokens_per_s, tokens, mfu, hfu  every step
//   memory/  peak_gb (the most of any rank)
//   time/    step_s, data_wait_s, forward_s, backward_s, sync_s, optimizer_s, pipeline_wait_s
//   data/    share of each source in the step's tokens
//   experts/ balance and z losses (mean over blocks), each expert's share of the routed tokens
//   eval/    loss, perplexity
//   kiln/    the layout (pipelines, nodes_used, nodes_idle, spares, tolerance) at every step, and in words
//            when it changes; each
//            failure's nodes_lost, detect_s, recovery_s, migrate_s, replay_s, bytes_migrated;
//            checkpoints' stall_s and MB; and every diag.h5 event as text under kiln/events/<kind>
#pragma once

#include "kiln/io/diag_file.hpp"
#include "kiln/io/event_file.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kiln::io {

class DiagBoard {
public:
    // Event files in `dir` (a new file beside any there). `sources`: the data sources' names, in
    // /source_tokens' order.
    DiagBoard(const std::string& dir, std::vector<std::string> sources);

    // A run starts or resumes at `step`: TensorBoard drops what it holds from that step on.
    void start(std::uint64_t step, double wallTime);
    void step(const StepRecord& record, const std::vector<std::uint64_t>& sourceTokens, const RouterRow& router,
              double wallTime);
    void event(std::uint64_t step, const std::string& kind, const std::string& detail, double wallTime);
    void instantiation(const InstantiationRecord& record);
    void failure(const FailureRecord& record);
    void evaluation(const EvalRecord& record);
    void flush() { file_.flush(); }
    const std::string& path() const { return file_.path(); }

private:
    EventFile file_;
    std::vector<std::string> sources_;
    std::optional<InstantiationRecord> layout_;  // the last one: its figures go with every step
};

// Writes `diagPath`'s records into event files in `dir`; returns the number of steps written.
std::uint64_t writeBoardFromDiag(const std::string& diagPath, const std::string& dir);

}  // namespace kiln::io
