#include "kiln/plan/speed_monitor.hpp"

#include "kiln/base/error.hpp"
#include "kiln/config/deck.hpp"
#include "kiln/plan/regroup.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>

namespace kiln::plan {
namespace {

double median(std::vector<double> values) {
    if (values.empty()) return 0.0;
    const auto mid = values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2);
    std::nth_element(values.begin(), mid, values.end());
    if (values.size() % 2 == 1) return *mid;
    return 0.5 * (*mid + *std::max_element(values.begin(), mid));
}

// The healthy reference among ranks: with an even count, the faster of the
// two middle ones (of two ranks, one slow, the other is the reference).
double lowerMedian(std::vector<double> values) {
    if (values.empty()) return 0.0;
    const auto mid = values.begin() + static_cast<std::ptrdiff_t>((values.size() - 1) / 2);
    std::nth_element(values.begin(), mid, values.end());
    return *mid;
}

}  // namespace

StragglerPolicy stragglerPolicyFromDeck(const config::Deck& deck) {
    StragglerPolicy p;
    p.rebalanceAt = deck.real("straggler.rebalance_at");
    p.steps = static_cast<std::uint32_t>(deck.integer("straggler.steps"));
    p.retireAt = deck.real("straggler.retire_at");
    p.retireSteps = static_cast<std::uint32_t>(deck.integer("straggler.retire_steps"));
    p.returnAt = deck.real("straggler.return_at");
    // Left at its default, it stays below a lowered retire_at: halfway there from 1.
    if (deck.setting("straggler.return_at").origin == "default" && p.retireAt > 0.0)
        p.returnAt = std::min(p.returnAt, (1.0 + p.retireAt) / 2.0);
    if (p.returnAt > 0.0 && p.retireAt > 0.0 && p.returnAt >= p.retireAt)
        throw InputError(fmt::format("straggler.return_at = {} ({}) is not below straggler.retire_at = {} ({}): a node "
                                     "would come back as slow as what retires it; lower it, or set it to 0 to never "
                                     "take a retired straggler back",
                                     p.returnAt, deck.setting("straggler.return_at").origin, p.retireAt,
                                     deck.setting("straggler.retire_at").origin));
    if (p.retireAt > 0.0 && p.rebalanceAt > 0.0 && p.retireAt < p.rebalanceAt)
        throw InputError(fmt::format("straggler.retire_at = {} ({}) is below straggler.rebalance_at = {} ({}): a node is "
                                     "retired only when it is slower than what a rebalance handles; raise it, or set it to "
                                     "0 to never retire",
                                     p.retireAt, deck.setting("straggler.retire_at").origin, p.rebalanceAt,
                                     deck.setting("straggler.rebalance_at").origin));
    return p;
}

void SpeedMonitor::reset(const std::vector<double>& assumed) {
    assumed_ = assumed;
    window_.clear();
    probes_.clear();
    sinceSplit_ = 0;
    skipNext_ = true;
    noted_ = false;
}

std::vector<double> SpeedMonitor::rankSlowdown(std::size_t steps, Over over) const {
    std::vector<double> out;
    if (window_.empty()) return out;
    out.assign(window_.back().x.size(), 0.0);
    for (std::size_t r = 0; r < out.size(); ++r) {
        std::vector<double> x;
        for (auto it = window_.rbegin(); it != window_.rend() && x.size() < steps; ++it)
            if (r < it->x.size() && it->x[r] > 0.0) x.push_back(it->x[r]);
        if (x.empty()) continue;
        switch (over) {
            case Over::Median: out[r] = median(x); break;
            case Over::Fastest: out[r] = *std::min_element(x.begin(), x.end()); break;
            case Over::Slowest: out[r] = *std::max_element(x.begin(), x.end()); break;
        }
    }
    return out;
}

std::vector<double> SpeedMonitor::pipelineSlowdown(const Layout& layout, std::size_t steps, Over over) const {
    const auto x = rankSlowdown(steps, over);
    std::vector<double> out(layout.pipelines.size(), 0.0);
    for (std::size_t p = 0; p < out.size(); ++p)
        for (int rank : layout.pipelines[p].ranks)
            if (static_cast<std::size_t>(rank) < x.size()) out[p] = std::max(out[p], x[static_cast<std::size_t>(rank)]);
    return out;
}

std::vector<std::pair<int, double>> SpeedMonitor::nodeSlowdown(const Layout& layout, std::size_t steps) const {
    const auto x = rankSlowdown(steps);
    std::map<int, double> nodes;
    for (const auto& pipeline : layout.pipelines) {
        const std::size_t perNode = pipeline.ranks.size() / pipeline.nodes;
        for (std::size_t k = 0; k < pipeline.ranks.size(); ++k) {
            const auto rank = static_cast<std::size_t>(pipeline.ranks[k]);
            if (rank < x.size() && x[rank] > 0.0)
                nodes[pipeline.nodeIds[k / perNode]] = std::max(nodes[pipeline.nodeIds[k / perNode]], x[rank]);
        }
    }
    return {nodes.begin(), nodes.end()};
}

SpeedMonitor::Recovered SpeedMonitor::recovered(const std::vector<double>& probe, const std::vector<int>& nodeOfRank,
                                                int referenceNode, std::uint32_t ranksPerNode) {
    Recovered back;
    if (policy_.returnAt <= 0.0) return back;
    std::vector<double> reference;
    for (std::size_t r = 0; r < probe.size() && r < nodeOfRank.size(); ++r)
        if (probe[r] > 0.0 && nodeOfRank[r] == referenceNode) reference.push_back(probe[r]);
    const double healthy = median(reference);
    if (healthy <= 0.0) return back;  // no reference this step: nothing to compare with
    // This step's slowdown of each benched node: its slowest probing rank's.
    std::map<int, std::pair<std::uint32_t, double>> nodes;  // probing ranks, slowdown
    for (std::size_t r = 0; r < probe.size() && r < nodeOfRank.size(); ++r) {
        if (probe[r] <= 0.0 || nodeOfRank[r] == referenceNode) continue;
        auto& [ranks, x] = nodes[nodeOfRank[r]];
        ++ranks;
        x = std::max(x, probe[r] / healthy);
    }
    for (auto it = probes_.begin(); it != probes_.end();)
        it = nodes.count(it->first) ? std::next(it) : probes_.erase(it);  // a node that stopped probing starts over
    for (const auto& [node, measured] : nodes) {
        if (measured.first != ranksPerNode) continue;  // a rank of it is gone: it cannot come back whole
        auto& history = probes_[node];
        history.push_back(measured.second);
        while (history.size() > policy_.retireSteps) history.pop_front();
        const double slowdown = median(std::vector<double>(history.begin(), history.end()));
        if (back.node < 0 && history.size() == policy_.retireSteps && slowdown <= policy_.returnAt)
            back = {node, slowdown};
    }
    if (back.node >= 0) probes_.erase(back.node);
    return back;
}

std::map<int, double> SpeedMonitor::probeSlowdowns() const {
    std::map<int, double> out;
    for (const auto& [node, history] : probes_)
        if (!history.empty()) out[node] = median(std::vector<double>(history.begin(), history.end()));
    return out;
}

MeasuredSpeeds SpeedMonitor::measured(const Layout& layout) const {
    MeasuredSpeeds m;
    if (window_.empty()) return m;
    std::vector<double> ratios;
    for (const auto& s : window_) ratios.push_back(s.ratio);
    m.ratio = median(ratios);
    m.pipelineSlowdown = pipelineSlowdown(layout, window_.size());
    m.nodeSlowdown = nodeSlowdown(layout, window_.size());
    return m;
}

bool SpeedMonitor::takeSample(const Layout& layout, const RunPlan& plan, const std::vector<double>& compute) {
    // Each measured rank's ratio, then relative to the median rank's.
    Sample sample;
    sample.x.assign(layout.roles.size(), 0.0);
    std::vector<double> ratios;
    for (const auto& pipeline : layout.pipelines) {
        if (pipeline.microbatches == 0) continue;
        const PipelineTemplate* t = pipeline.share().templateIn(plan.templates);
        if (!t) continue;
        // Compute against compute: the ranks' times leave out their transfers.
        const auto plannedCompute = [](const Stage& stage) { return stage.compute > 0.0 ? stage.compute : stage.time; };
        double bottleneck = 0.0;
        for (const Stage& stage : t->stages) bottleneck = std::max(bottleneck, plannedCompute(stage));
        const double mb = double(pipeline.microbatches);
        for (std::size_t k = 0; k < pipeline.ranks.size(); ++k) {
            const auto rank = static_cast<std::size_t>(pipeline.ranks[k]);
            const double planned = plannedCompute(t->stages.at(k / pipeline.width)) * mb;
            if (rank >= compute.size() || rank >= sample.x.size() || planned <= 0.0 || compute[rank] <= 0.0) continue;
            ratios.push_back(compute[rank] / planned);
            sample.x[rank] = compute[rank] / (bottleneck * mb);
        }
    }
    sample.ratio = lowerMedian(ratios);
    if (sample.ratio <= 0.0) return false;
    for (auto& x : sample.x) x /= sample.ratio;
    window_.push_back(std::move(sample));
    ++sinceSplit_;
    while (window_.size() > std::max(policy_.steps, policy_.retireSteps)) window_.pop_front();
    return true;
}

std::pair<Instantiation, std::vector<double>> SpeedMonitor::measuredSplit(const Layout& layout, const RunPlan& plan,
                                                                          std::size_t steps, double& currentStep) const {
    const std::size_t P = layout.pipelines.size();
    std::vector<double> slowdown = pipelineSlowdown(layout, steps);
    for (std::size_t p = 0; p < P; ++p)
        if (slowdown[p] <= 0.0) slowdown[p] = assumed_[p];  // never measured (no microbatches): as assumed
    Instantiation inst;
    currentStep = 0.0;
    for (std::size_t p = 0; p < P; ++p) {
        const auto& pipeline = layout.pipelines[p];
        inst.pipelines.push_back(pipeline.share());
        currentStep =
            std::max(currentStep, stepTimeOf(plan.templates, inst.pipelines.back(), pipeline.microbatches, slowdown[p]));
    }
    try {
        distributeMicrobatches(plan.templates, plan.globalMicrobatches, inst, slowdown);
    } catch (const InputError&) {
        // No split of the batch fits these pipelines' memory but the one running: keep it.
        for (std::size_t p = 0; p < P; ++p) inst.pipelines[p].microbatches = layout.pipelines[p].microbatches;
        inst.stepTime = currentStep;
    }
    return {inst, slowdown};
}

bool SpeedMonitor::considerRetiring(const Layout& layout, const RunPlan& plan, std::uint32_t liveNodes,
                                    std::uint32_t tolerance, SpeedVerdict& verdict) {
    // A node beyond retire_at over the retire window.
    if (policy_.retireAt <= 0.0 || window_.size() < policy_.retireSteps) return false;
    const double R = window_.back().ratio;
    int slowest = -1;
    double worst = 0.0;
    for (const auto& [node, x] : nodeSlowdown(layout, policy_.retireSteps))
        if (x > policy_.retireAt && x > worst) {
            slowest = node;
            worst = x;
        }
    if (slowest < 0) return false;
    const Regroup without = liveNodes > 1 ? regroup(plan, liveNodes - 1) : Regroup{};
    double currentStep = 0.0;
    const auto [rebalanced, slowdown] = measuredSplit(layout, plan, policy_.retireSteps, currentStep);
    // With it: rebalanced, or as it is when rebalancing is off.
    const double withIt = policy_.rebalanceAt > 0.0 ? rebalanced.stepTime : currentStep;
    const char* how = policy_.rebalanceAt > 0.0 ? "rebalanced" : "as split now";
    std::string refused;
    if (!without.possible) {
        refused = fmt::format("the {} other node{} cannot form a pipeline", liveNodes - 1, liveNodes == 2 ? "" : "s");
    } else if (without.tolerance < std::min<std::uint32_t>(tolerance, static_cast<std::uint32_t>(plan.f))) {
        refused = fmt::format("without it the job would tolerate {} node failure{} at once, not {}", without.tolerance,
                              without.tolerance == 1 ? "" : "s", tolerance);
    } else if (without.instantiation.stepTime >= withIt) {
        refused = fmt::format("the plan predicts no shorter step without it ({} on {} nodes: {:.3g} s against "
                              "{:.3g} s with it, {})",
                              sharesOf(without.instantiation), without.activeNodes, without.instantiation.stepTime * R,
                              withIt * R, how);
    }
    if (refused.empty()) {
        verdict.action = SpeedVerdict::Action::Retire;
        verdict.node = slowest;
        verdict.nodeSlowdown = worst;
        verdict.detail = fmt::format("node {} computed {:.2f}x slower than its pipeline's planned bottleneck "
                                     "allows (against the median rank) over {} steps (straggler.retire_at = {}); "
                                     "the plan predicts a {:.3g} s step without it, {:.3g} s with it, {}",
                                     slowest, worst, policy_.retireSteps, policy_.retireAt,
                                     without.instantiation.stepTime * R, withIt * R, how);
        return true;
    }
    if (!noted_) {
        noted_ = true;
        verdict.note = fmt::format("node {} computes {:.2f}x slower than its pipeline's planned bottleneck allows "
                                   "(against the median rank) but stays: {}",
                                   slowest, worst, refused);
    }
    return false;
}

void SpeedMonitor::considerRebalancing(const Layout& layout, const RunPlan& plan, SpeedVerdict& verdict) {
    // A pipeline off its assumed speed in every step since the last
    // split. Timing noise only ever adds time (a preempted rank, a page
    // fault), so a rank's fastest step is its speed: slower means some rank
    // slow in each step, faster means every rank fast in each step. (Judged
    // on medians, one long step left the median of three at the slower of the
    // two others, and on six ranks sharing two cores that alone rebalanced.)
    // The new split itself takes the medians, the typical step.
    if (policy_.rebalanceAt <= 0.0 || sinceSplit_ < policy_.steps) return;
    const std::size_t P = layout.pipelines.size();
    const double R = window_.back().ratio;
    const auto fastest = pipelineSlowdown(layout, policy_.steps, Over::Fastest);
    const auto slowest = pipelineSlowdown(layout, policy_.steps, Over::Slowest);
    std::vector<std::string> off;
    for (std::size_t p = 0; p < P; ++p) {
        if (fastest[p] <= 0.0) continue;
        if (fastest[p] / assumed_[p] > policy_.rebalanceAt)
            off.push_back(fmt::format("pipeline {} at least {:.2f}x slower than its share assumed", p,
                                      fastest[p] / assumed_[p]));
        else if (slowest[p] / assumed_[p] < 1.0 / policy_.rebalanceAt)
            off.push_back(fmt::format("pipeline {} at least {:.2f}x faster than its share assumed", p,
                                      assumed_[p] / slowest[p]));
    }
    if (off.empty()) return;
    double currentStep = 0.0;
    auto [inst, slowdown] = measuredSplit(layout, plan, policy_.steps, currentStep);
    const std::string before = sharesOf(layout);
    // What the split assumes is what was measured, whether it changes or not.
    assumed_ = slowdown;
    sinceSplit_ = 0;
    // A new split must be worth it: on shared or noisy nodes a gain of a few
    // per cent is measurement noise, and acting on it makes the split flap.
    if (sharesOf(inst) == before || inst.stepTime > (1.0 - kRebalanceMinGain) * currentStep) return;
    try {
        checkStageMemory(plan.templates, inst, "the rebalanced layout " + sharesOf(inst));
    } catch (const InputError& e) {
        verdict.note = fmt::format("{}, but {}", fmt::join(off, ", "), e.what());
        return;
    }
    verdict.action = SpeedVerdict::Action::Rebalance;
    verdict.instantiation = inst;
    verdict.slowdown = slowdown;
    verdict.detail = fmt::format("{} in each of {} steps (straggler.rebalance_at = {}): the batch split again from {} to {} "
                                 "by measured speed (slowdowns {:.2f}); predicted step {:.3g} s, {:.3g} s without",
                                 fmt::join(off, ", "), policy_.steps, policy_.rebalanceAt, before, sharesOf(inst),
                                 fmt::join(slowdown, ", "), inst.stepTime * R, currentStep * R);
}

SpeedVerdict SpeedMonitor::observe(const Layout& layout, const RunPlan& plan, const std::vector<double>& compute,
                                   std::uint32_t liveNodes, std::uint32_t tolerance) {
    SpeedVerdict verdict;
    if (skipNext_) {
        skipNext_ = false;
        return verdict;
    }
    if (assumed_.size() != layout.pipelines.size()) assumed_.assign(layout.pipelines.size(), 1.0);
    if (!takeSample(layout, plan, compute)) return verdict;
    if (considerRetiring(layout, plan, liveNodes, tolerance, verdict)) return verdict;
    considerRebalancing(layout, plan, verdict);
    return verdict;
}

}  // namespace kiln::plan
