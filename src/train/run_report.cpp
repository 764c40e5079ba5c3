#include "run_report.hpp"

#include "kiln/base/error.hpp"
#include "kiln/base/log.hpp"
#include "kiln/comm/mpi_check.hpp"
#include "kiln/comm/world.hpp"
#include "kiln/io/teardown_rows.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <sstream>

namespace kiln::train {
namespace {

double now() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

}  // namespace

void RunReport::describeRun(std::filesystem::path path, std::string deckText, std::vector<std::string> sources,
                            std::vector<io::TemplateStageRecord> templates, io::RouterShape router,
                            std::string boardDir) {
    if (!boardDir.empty()) {
        std::error_code ec;
        std::filesystem::create_directories(boardDir, ec);
        if (ec || access(boardDir.c_str(), W_OK) != 0)
            throw InputError(fmt::format("run.tensorboard_dir: {} cannot be written ({}); give a directory this job can "
                                         "write, or run.tensorboard = false",
                                         boardDir, ec ? ec.message() : std::strerror(errno)));
    }
    boardDir_ = std::move(boardDir);
    path_ = std::move(path);
    deckText_ = std::move(deckText);
    sources_ = std::move(sources);
    templates_ = std::move(templates);
    router_ = router;
}

void RunReport::open(bool continueRun, std::uint64_t step, const std::string& kind, const std::string& detail) {
    file_ = std::make_unique<io::DiagFile>(path_.string(), deckText_, sources_, templates_, continueRun, router_);
    if (!boardDir_.empty()) {
        board_ = std::make_unique<io::DiagBoard>(boardDir_, sources_);
        // A start or a resume records step `step` next: TensorBoard drops what an earlier attempt showed from there.
        if (kind == "start" || kind == "resume") board_->start(step, now());
    }
    event(step, kind, detail);
}

void RunReport::event(std::uint64_t step, const std::string& kind, const std::string& detail) {
    if (file_) file_->event(step, kind, detail);
    if (board_) board_->event(step, kind, detail, now());
}

void RunReport::notice(std::uint64_t step, const std::string& kind, const std::string& detail) {
    std::string tag = kind;
    for (auto& c : tag) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    log::info("  {} {}", tag, detail);
    event(step, kind, detail);
}

void RunReport::instantiation(const io::InstantiationRecord& record) {
    if (file_) file_->instantiation(record);
    if (board_) board_->instantiation(record);
}

void RunReport::evaluation(const io::EvalRecord& record) {
    if (file_) file_->evaluation(record);
    if (board_) board_->evaluation(record);
}

void RunReport::failure(const io::FailureRecord& record) {
    if (file_) file_->failure(record);
    if (board_) board_->failure(record);
}

RunReport::Teardown RunReport::markTeardownCasualties(std::uint64_t step, const std::string& namedHosts,
                                                      const std::vector<std::string>& currentHosts) {
    Teardown result{0, namedHosts};
    if (!file_) return result;
    const auto events = file_->events();
    std::vector<double> starts;  // every attempt's start; this attempt's is the last
    for (const auto& e : events)
        if (std::string(e.kind) == "start" || std::string(e.kind) == "resume") starts.push_back(e.time);
    if (starts.size() < 2) return result;
    const double since = starts[starts.size() - 2], until = starts.back();
    std::vector<std::string> nodeHosts;  // the lost attempt's host of each node, as its "hosts" event says
    for (const auto& e : events) {
        if (std::string(e.kind) != "hosts" || e.time < since || e.time >= until) continue;
        nodeHosts.clear();
        std::istringstream in(e.detail);
        for (std::string name; in >> name && name.find("...[+") == std::string::npos;) nodeHosts.push_back(name);
    }
    result.lostHosts = io::lostHostsOf(namedHosts, nodeHosts, currentHosts);
    if (result.lostHosts != namedHosts && !namedHosts.empty())
        notice(step, "lost_host", fmt::format("the launcher named host {} lost, which this attempt runs on again; the "
                                              "lost attempt's host{} this one lacks: {}",
                                              namedHosts, result.lostHosts.find(',') == std::string::npos ? "" : "s",
                                              result.lostHosts));
    const std::string& lostHost = result.lostHosts;
    if (lostHost.empty()) return result;
    const auto rows = file_->failures();
    const auto casualties = io::teardownCasualties(rows, since, nodeHosts, lostHost);
    std::vector<std::string> ranks;
    for (const auto i : casualties) {
        file_->setFailureCause(i, "teardown");
        ranks.emplace_back(rows[i].failedRanks);
    }
    const bool several = lostHost.find(',') != std::string::npos;
    if (!casualties.empty())
        notice(step, "teardown", fmt::format("the lost attempt recorded rank{} {} as failed after host{} {} {} lost; Open "
                                             "MPI's runtime ends the whole job once it loses a host's daemon, so those "
                                             "rows now say cause 'teardown', not 'process'",
                                             ranks.size() == 1 && ranks[0].find(',') == std::string::npos ? "" : "s",
                                             fmt::join(ranks, ", "), several ? "s" : "", lostHost,
                                             several ? "were" : "was"));
    result.casualties = casualties.size();
    return result;
}

void RunReport::failureReplayed(double replaySeconds) {
    if (!pending_) return;
    pending_->replay = replaySeconds;
    failure(*pending_);
    pending_.reset();
}

void RunReport::step(io::StepRecord record, std::vector<std::uint64_t> sourceTokens, io::RouterRow router) {
    record.time = now();
    if (file_) file_->step(record, sourceTokens, router);
    if (board_) board_->step(record, sourceTokens, router, record.time);
    lastRow_ = StepRow{record, std::move(sourceTokens), std::move(router)};
}

void RunReport::handOver(const comm::World& world, int speaker, std::uint64_t step) {
    log::speakForJob(world.originalRank() == speaker);
    if (speaker == holder_) return;
    // HDF5 allows one writer: a live holder (benched on a retired node) closes the file before anyone reopens it.
    const auto& members = world.members();
    const bool holderLives = std::find(members.begin(), members.end(), holder_) != members.end();
    if (holderLives) {
        if (world.originalRank() == holder_) {
            file_.reset();
            board_.reset();
        }
        KILN_MPI(MPI_Barrier(world.control()));
    }
    const int previous = holder_;
    holder_ = speaker;
    if (world.originalRank() != speaker || file_) return;
    open(true, step, "takeover",
         fmt::format("diagnostics taken over by start-up rank {} after rank {} {}", speaker, previous,
                     holderLives ? "was retired with its node" : "failed"));
    // The previous holder may have died after a step's commit, before its row.
    if (lastRow_ && (!file_->lastStep() || *file_->lastStep() < lastRow_->record.step)) {
        file_->step(lastRow_->record, lastRow_->sourceTokens, lastRow_->router);
        if (board_) board_->step(lastRow_->record, lastRow_->sourceTokens, lastRow_->router, lastRow_->record.time);
    }
}

}  // namespace kiln::train
