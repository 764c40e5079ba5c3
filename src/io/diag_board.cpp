#include "kiln/io/diag_board.hpp"

#include "kiln/io/diag_summary.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <regex>

namespace kiln::io {
namespace {

std::size_t countOf(const char* list) {
    const std::string s(list);
    return s.empty() ? 0 : std::size_t(std::count(s.begin(), s.end(), ',')) + 1;
}

}  // namespace

DiagBoard::DiagBoard(const std::string& dir, std::vector<std::string> sources)
    : file_(dir), sources_(std::move(sources)) {}

void DiagBoard::start(std::uint64_t step, double wallTime) { file_.sessionStart(std::int64_t(step), wallTime); }

void DiagBoard::step(const StepRecord& r, const std::vector<std::uint64_t>& sourceTokens, const RouterRow& router,
                     double wallTime) {
    const auto s = std::int64_t(r.step);
    const auto put = [&](const char* tag, double value) { file_.scalar(tag, s, value, wallTime); };
    put("train/loss", r.loss);
    put("train/lr", r.lr);
    put("train/grad_norm", r.gradNorm);
    put("train/tokens", double(r.tokens));
    if (r.stepTime > 0) put("train/tokens_per_s", double(r.tokens) / r.stepTime);
    if (r.mfu > 0) put("train/mfu", r.mfu);
    if (r.hfu > 0) put("train/hfu", r.hfu);
    if (r.peakMemory > 0) put("memory/peak_gb", r.peakMemory / 1e9);
    if (layout_) {
        // The layout at every step, not only where it changed: TensorBoard draws a line between points, and a
        // tolerance that held for 300 steps must not read as a slope.
        put("kiln/layout/pipelines", layout_->pipelines);
        put("kiln/layout/nodes_used", layout_->nodesUsed);
        put("kiln/layout/nodes_idle", layout_->nodesIdle);
        put("kiln/layout/spares", layout_->spares);
        put("kiln/layout/tolerance", layout_->tolerance);
        put("kiln/layout/predicted_step_s", layout_->predictedStepTime);
    }
    put("time/step_s", r.stepTime);
    put("time/data_wait_s", r.dataWait);
    put("time/forward_s", r.forward);
    put("time/backward_s", r.backward);
    put("time/sync_s", r.sync);
    put("time/optimizer_s", r.optimizer);
    put("time/pipeline_wait_s", r.pipelineWait);
    double total = 0;
    for (auto t : sourceTokens) total += double(t);
    for (std::size_t i = 0; i < sources_.size() && i < sourceTokens.size() && total > 0; ++i)
        file_.scalar("data/" + sources_[i], s, double(sourceTokens[i]) / total, wallTime);
    const auto mean = [](const std::vector<double>& v) {
        double sum = 0;
        for (double x : v) sum += x;
        return v.empty() ? 0.0 : sum / double(v.size());
    };
    if (!router.balance.empty()) put("experts/balance", mean(router.balance));
    if (!router.z.empty()) put("experts/z", mean(router.z));
    if (!router.load.empty() && !router.balance.empty()) {
        // Each expert's share of the routed tokens, over every block (1 / experts: fair).
        const std::size_t blocks = router.balance.size(), experts = router.load.size() / blocks;
        std::vector<double> byExpert(experts, 0.0);
        double all = 0;
        for (std::size_t b = 0; b < blocks; ++b)
            for (std::size_t e = 0; e < experts; ++e) {
                byExpert[e] += router.load[b * experts + e];
                all += router.load[b * experts + e];
            }
        for (std::size_t e = 0; e < experts && all > 0; ++e)
            file_.scalar(fmt::format("experts/share/{:03d}", e), s, byExpert[e] / all, wallTime);
    }
    file_.flush();  // TensorBoard shows the step as its log line appears
}

void DiagBoard::event(std::uint64_t step, const std::string& kind, const std::string& detail, double wallTime) {
    const auto s = std::int64_t(step);
    file_.text("kiln/events/" + kind, s, detail, wallTime);
    if (kind == "checkpoint") {
        // RunCheckpoints::describe's words: "in S s", or "training stalled S s, this rank wrote M MB in W s".
        static const std::regex stalled(R"((?:stalled|^\S+ in) ([0-9.]+) s)"), wrote(R"(wrote ([0-9.]+) MB)");
        std::smatch m;
        if (std::regex_search(detail, m, stalled)) file_.scalar("kiln/checkpoint/stall_s", s, std::stod(m[1]), wallTime);
        if (std::regex_search(detail, m, wrote)) file_.scalar("kiln/checkpoint/rank_mb", s, std::stod(m[1]), wallTime);
    }
    file_.flush();
}

void DiagBoard::instantiation(const InstantiationRecord& r) {
    const auto s = std::int64_t(r.step);
    layout_ = r;
    file_.text("kiln/layout", s,
               fmt::format("{} pipelines `{}` on {} nodes ({} idle, {} spare), tolerating {} node failures; ranks `{}`",
                           r.pipelines, r.layout, r.nodesUsed, r.nodesIdle, r.spares, r.tolerance, r.ranks),
               r.time);
    file_.flush();
}

void DiagBoard::failure(const FailureRecord& r) {
    const auto s = std::int64_t(r.step);
    file_.scalar("kiln/failure/nodes_lost", s, double(countOf(r.retiredNodes)), r.time);
    file_.scalar("kiln/failure/detect_s", s, r.detect, r.time);
    file_.scalar("kiln/failure/recovery_s", s, r.revoke + r.shrink + r.regroup + r.instantiate + r.rebuild, r.time);
    file_.scalar("kiln/failure/migrate_s", s, r.migrate, r.time);
    file_.scalar("kiln/failure/replay_s", s, r.replay, r.time);
    file_.scalar("kiln/failure/bytes_migrated", s, double(r.bytesMigrated), r.time);
    file_.text("kiln/failure", s,
               fmt::format("cause **{}**: ranks {} failed, nodes {} retired, {} round{}; now `{}`",
                           r.cause[0] ? r.cause : "process", r.failedRanks, r.retiredNodes, r.rounds,
                           r.rounds == 1 ? "" : "s", r.layout),
               r.time);
    file_.flush();
}

void DiagBoard::evaluation(const EvalRecord& r) {
    file_.scalar("eval/loss", std::int64_t(r.step), r.loss, r.time);
    file_.scalar("eval/perplexity", std::int64_t(r.step), r.perplexity, r.time);
    file_.flush();
}

std::uint64_t writeBoardFromDiag(const std::string& diagPath, const std::string& dir) {
    auto r = readDiagRecords(diagPath);
    DiagBoard board(dir, r.sources);
    // Every record in the order the run made it (by its time), so that a resume drops what its first
    // attempt wrote after the checkpoint as it did live. A file from before /steps had a time (0) is put in
    // step order instead, each step's rows after the records of that step, the rows in the order written:
    // TensorBoard then keeps each step's last value, and every step shows the layout it ran.
    bool timed = true;
    for (const auto& s : r.steps) timed = timed && s.time > 0;
    struct Item {
        double key;
        std::function<void()> write;
    };
    std::vector<Item> items;
    const auto at = [timed](double time, std::uint64_t step, bool row) {
        return timed ? time : double(step) + (row ? 0.5 : 0.0);
    };
    for (const auto& l : r.layouts) items.push_back({at(l.time, l.step, false), [&board, &l] { board.instantiation(l); }});
    for (const auto& f : r.failures) items.push_back({at(f.time, f.step, false), [&board, &f] { board.failure(f); }});
    for (const auto& e : r.evals) items.push_back({at(e.time, e.step, false), [&board, &e] { board.evaluation(e); }});
    for (const auto& e : r.events)
        items.push_back({at(e.time, e.step, false), [&board, &e] {
                             if (std::string(e.kind) == "start" || std::string(e.kind) == "resume")
                                 board.start(e.step, e.time);
                             board.event(e.step, e.kind, e.detail, e.time);
                         }});
    for (std::size_t i = 0; i < r.steps.size(); ++i)
        items.push_back({at(r.steps[i].time, r.steps[i].step, true), [&board, &r, i] {
                             board.step(r.steps[i],
                                        i < r.sourceTokens.size() ? r.sourceTokens[i] : std::vector<std::uint64_t>{},
                                        i < r.router.size() ? r.router[i] : RouterRow{}, r.steps[i].time);
                         }});
    std::stable_sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.key < b.key; });
    for (const auto& item : items) item.write();
    board.flush();
    return r.steps.size();
}

}  // namespace kiln::io
