#include "kiln/io/diag_summary.hpp"

#include <algorithm>
#include <map>

namespace kiln::io {
namespace {

// A resumed run re-records the steps after its checkpoint: the last record of a step wins.
// `rows` receives the index in `records` of each kept record.
std::vector<StepRecord> latestPerStep(const std::vector<StepRecord>& records, std::vector<std::size_t>& rows) {
    std::map<std::uint64_t, std::size_t> last;
    for (std::size_t i = 0; i < records.size(); ++i) last[records[i].step] = i;
    std::vector<StepRecord> out;
    for (const auto& [step, i] : last) {
        out.push_back(records[i]);
        rows.push_back(i);
    }
    return out;
}

std::vector<EvalRecord> latestPerStep(const std::vector<EvalRecord>& records) {
    std::map<std::uint64_t, EvalRecord> last;
    for (const auto& r : records) last[r.step] = r;
    std::vector<EvalRecord> out;
    for (const auto& [step, r] : last) out.push_back(r);
    return out;
}

StepTotals totalsOf(const std::vector<StepRecord>& steps) {
    StepTotals t;
    for (const auto& r : steps) {
        t.time += r.stepTime;
        t.dataWait += r.dataWait;
        t.tokens += double(r.tokens);
        t.forward += r.forward;
        t.backward += r.backward;
        t.sync += r.sync;
        t.optimizer += r.optimizer;
        t.pipelineWait += r.pipelineWait;
    }
    return t;
}

}  // namespace

double medianOf(std::vector<double> values) {
    if (values.empty()) return 0.0;
    std::sort(values.begin(), values.end());
    return values[values.size() / 2];
}

DiagRecords readDiagRecords(const std::string& path) {
    auto file = openDiagForReading(path);
    DiagRecords r;
    r.steps = DiagFile::readSteps(file);
    r.sourceTokens = DiagFile::readSourceTokens(file, r.sources);
    r.events = DiagFile::readEvents(file);
    r.layouts = DiagFile::readInstantiations(file);
    r.failures = DiagFile::readFailures(file);
    r.evals = DiagFile::readEvals(file);
    r.router = DiagFile::readRouter(file, r.routerShape);
    return r;
}

std::vector<double> expertShares(const RouterRow& row, RouterShape shape) {
    const std::size_t experts = shape.experts;
    std::vector<double> shares(std::size_t{shape.blocks} * experts, 0.0);
    for (std::size_t b = 0; b < shape.blocks; ++b) {
        double total = 0.0;
        for (std::size_t e = 0; e < experts && b * experts + e < row.load.size(); ++e) total += row.load[b * experts + e];
        for (std::size_t e = 0; e < experts && b * experts + e < row.load.size(); ++e)
            if (total > 0) shares[b * experts + e] = row.load[b * experts + e] * double(experts) / total;
    }
    return shares;
}

DiagSummary summarize(DiagRecords records) {
    DiagSummary s;
    std::vector<std::size_t> rows;
    s.steps = latestPerStep(records.steps, rows);
    s.sources = std::move(records.sources);
    for (auto r : rows)
        s.mix.push_back(r < records.sourceTokens.size() ? records.sourceTokens[r]
                                                         : std::vector<std::uint64_t>(s.sources.size()));
    s.routerShape = records.routerShape;
    if (!records.router.empty())
        for (auto r : rows) s.router.push_back(r < records.router.size() ? records.router[r] : RouterRow{});
    s.tokensPerSource.assign(s.sources.size(), 0);
    for (const auto& row : s.mix)
        for (std::size_t i = 0; i < s.sources.size() && i < row.size(); ++i) s.tokensPerSource[i] += row[i];
    s.totals = totalsOf(s.steps);
    s.layouts = std::move(records.layouts);
    // A layout runs from its step to the next layout's.
    for (std::size_t i = 0; i < s.layouts.size(); ++i) {
        const std::uint64_t end = i + 1 < s.layouts.size() ? s.layouts[i + 1].step : ~std::uint64_t{0};
        std::vector<double> times;
        for (const auto& r : s.steps)
            if (r.step >= s.layouts[i].step && r.step < end) times.push_back(r.stepTime);
        s.measuredStepTime.push_back(medianOf(std::move(times)));
    }
    s.failures = std::move(records.failures);
    s.evals = latestPerStep(records.evals);
    s.events = std::move(records.events);
    return s;
}

}  // namespace kiln::io
