// The run's record: diag.h5, TensorBoard's event files beside it (the same
// records, io::DiagBoard), and the lines of the log a user acts on (ADMIT,
// TOLERANCE, REBALANCE, ...: docs/reference/log.md). One member speaks for
// the job: it holds diag.h5 open (HDF5 allows one writer) and prints the
// job's lines (log::speakForJob). After a failure or a retirement the lowest
// member on a node that stays takes over (handOver). Every call is safe on
// every rank; the ranks that do not hold diag.h5 write nothing to it.
// Private to train/.
#pragma once

#include "kiln/io/diag_board.hpp"
#include "kiln/io/diag_file.hpp"

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kiln::comm {
class World;
}

namespace kiln::train {

class RunReport {
public:
    // What diag.h5 is created with: the resolved deck, the data sources' names, the templates' stages.
    // `router`: a mixture of experts' blocks and experts (diag.h5's router tables), none for a dense model.
    // `boardDir`: where the event files go (empty: none); made here, on every rank, and refused by name
    // when it cannot be written, before any rank depends on another.
    void describeRun(std::filesystem::path path, std::string deckText, std::vector<std::string> sources,
                     std::vector<io::TemplateStageRecord> templates, io::RouterShape router = {},
                     std::string boardDir = {});
    // This rank opens diag.h5 (a new file, or appending: `continueRun`) and
    // records event `kind`.
    void open(bool continueRun, std::uint64_t step, const std::string& kind, const std::string& detail);
    bool holds() const { return file_ != nullptr; }
    // The start-up rank that holds diag.h5 (or held it last).
    int holder() const { return holder_; }
    void setHolder(int startupRank) { holder_ = startupRank; }

    // An event in diag.h5 alone.
    void event(std::uint64_t step, const std::string& kind, const std::string& detail);
    // A line the user acts on, "  KIND detail" with the kind in capitals, and the same event in diag.h5.
    void notice(std::uint64_t step, const std::string& kind, const std::string& detail);
    void instantiation(const io::InstantiationRecord& record);
    void evaluation(const io::EvalRecord& record);
    void failure(const io::FailureRecord& record);
    // A failure the job recovered from waits for its replay's seconds:
    // written by failureReplayed (whoever holds diag.h5 by then), nothing
    // when none waits.
    void failureReplaying(const io::FailureRecord& record) { pending_ = record; }
    // In a requeued attempt whose previous launch was lost: the hosts it lost (io::lostHostsOf, from the
    // launcher's `namedHosts`, the previous attempt's "hosts" event and this attempt's `currentHosts`), and how many
    // of its /failures rows were Open MPI's teardown (io/teardown_rows.hpp), which now say cause "teardown"; a
    // notice says which.
    struct Teardown {
        std::size_t casualties;
        std::string lostHosts;  // comma-separated
    };
    Teardown markTeardownCasualties(std::uint64_t step, const std::string& namedHosts,
                                    const std::vector<std::string>& currentHosts);
    void failureReplayed(double replaySeconds);
    // A committed step's /steps row. Every rank keeps the last one: a holder
    // that dies between the commit and its row leaves it to the next.
    void step(io::StepRecord record, std::vector<std::uint64_t> sourceTokens, io::RouterRow router = {});

    // After a recovery round or a retirement, on every member: `speaker` (a
    // start-up rank) speaks for the job from now on and holds diag.h5; a live
    // previous holder closes it first. Collective over world.control().
    void handOver(const comm::World& world, int speaker, std::uint64_t step);

private:
    std::filesystem::path path_;
    std::string deckText_;
    std::vector<std::string> sources_;
    std::vector<io::TemplateStageRecord> templates_;
    io::RouterShape router_;
    std::unique_ptr<io::DiagFile> file_;
    std::string boardDir_;
    std::unique_ptr<io::DiagBoard> board_;  // beside file_, on the same rank
    int holder_ = 0;
    std::optional<io::FailureRecord> pending_;
    struct StepRow {
        io::StepRecord record;
        std::vector<std::uint64_t> sourceTokens;
        io::RouterRow router;
    };
    std::optional<StepRow> lastRow_;
};

}  // namespace kiln::train
