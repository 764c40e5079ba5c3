#include "kiln/sim/simulation.hpp"

#include "kiln/base/error.hpp"
#include "kiln/plan/layout.hpp"
#include "kiln/plan/migration.hpp"
#include "kiln/plan/regroup.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <queue>

namespace kiln::sim {

std::string nameOf(Policy policy) {
    switch (policy) {
        case Policy::Kiln: return "kiln (f restored after every failure)";
        case Policy::FPerRun: return "f per run (before redundancy was restored)";
        case Policy::CheckpointRestart: return "checkpoint-restart only";
    }
    return "?";
}

double youngInterval(double delta, double mtbf) { return std::sqrt(2.0 * delta * mtbf); }

// Each attempt at tau + delta fails with p = 1 - exp(-(tau + delta) / M); a
// failure costs the time lost, `fixed`, and the restart with its own retries,
// M (exp(R / M) - 1). Solving the renewal equation gives the expected wall time
// of one checkpointed interval: (exp((tau + delta) / M) - 1) (M exp(R / M) + fixed).
double dalyEfficiency(double tau, double delta, double restart, double mtbf, double fixed) {
    return tau / (std::expm1((tau + delta) / mtbf) * (mtbf * std::exp(restart / mtbf) + fixed));
}

namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();

class Simulation {
public:
    Simulation(const plan::RunPlan& plan, const SimCosts& costs, const RunSetup& setup)
        : plan_(plan), costs_(costs), setup_(setup) {
        nodes_ = plan.cluster.nodes + plan.spares;
        live_.assign(nodes_, 1);
        result_.seconds = setup.seconds;
        result_.referenceTokensPerSecond = setup.referenceTokensPerSecond;
        result_.minTolerance = std::numeric_limits<std::uint32_t>::max();
        startRate_ = rateOf(plan.instantiation);
        double stateBytes = 0;
        for (double b : setup.layerBytes) stateBytes += b;
        stateBytes_ = stateBytes;
        start(/*requeued=*/false);
    }

    SimResult run(const std::vector<FailureEvent>& failures) {
        for (const auto& failure : failures) {
            if (failure.time >= setup_.seconds) break;
            handleReturnsUntil(failure.time);
            advanceTo(failure.time);
            if (finished_) break;
            fail(failure);
        }
        handleReturnsUntil(setup_.seconds);
        advanceTo(setup_.seconds);
        result_.seconds = now_;
        result_.steps = steps_;
        result_.usefulTokens = steps_ * setup_.tokensPerStep;
        mark();
        return result_;
    }

private:
    enum class Phase { Running, Recovering, Requeued };
    // A stretch of time the job does not train, charged to a cause as it passes.
    struct Stall {
        double seconds;
        double LostTime::*cause;
        bool restartable = false;  // a requeue's start-up and restore: a failure starts them again
    };

    // A layout's step: as measured (--costs-from), or the planner's prediction scaled.
    double stepOf(const plan::Instantiation& inst) const {
        const auto it = costs_.measuredStepSeconds.find(plan::sharesOf(inst));
        return it != costs_.measuredStepSeconds.end() ? it->second : inst.stepTime * costs_.stepScale.value;
    }
    double rateOf(const plan::Instantiation& inst) const { return setup_.tokensPerStep / stepOf(inst); }
    // The running layout's (kept: asked at every event).
    double stepSeconds() const { return step_; }
    double rate() const { return setup_.tokensPerStep / step_; }
    std::uint32_t liveCount() const {
        return static_cast<std::uint32_t>(std::count(live_.begin(), live_.end(), char(1)));
    }

    // regroup() depends on the number of live nodes alone: asked once per number.
    const plan::Regroup& regroupFor(std::uint32_t live) {
        auto it = regroups_.find(live);
        if (it == regroups_.end()) it = regroups_.emplace(live, plan::regroup(plan_, live)).first;
        return it->second;
    }

    // Node n lives (or not), and the lists of live nodes and their ranks follow: kept up to date one node at a
    // time, not built again for every switch (16 k nodes, thousands of switches).
    void setLive(std::uint32_t n, bool live) {
        if ((live_[n] != 0) == live) return;
        live_[n] = live ? 1 : 0;
        const auto at = std::lower_bound(liveIds_.begin(), liveIds_.end(), static_cast<int>(n)) - liveIds_.begin();
        if (live) {
            liveIds_.insert(liveIds_.begin() + at, static_cast<int>(n));
            liveRanks_.insert(liveRanks_.begin() + at, ranksOf(n));
        } else {
            liveIds_.erase(liveIds_.begin() + at);
            liveRanks_.erase(liveRanks_.begin() + at);
        }
    }
    void setAllLive() {
        std::fill(live_.begin(), live_.end(), char(1));
        liveIds_.clear();
        liveRanks_.clear();
        for (std::uint32_t n = 0; n < nodes_; ++n) {
            liveIds_.push_back(static_cast<int>(n));
            liveRanks_.push_back(ranksOf(n));
        }
    }
    std::vector<int> ranksOf(std::uint32_t n) const {
        std::vector<int> r(setup_.ranksPerNode);
        for (std::uint32_t i = 0; i < setup_.ranksPerNode; ++i) r[i] = static_cast<int>(n * setup_.ranksPerNode + i);
        return r;
    }

    // The running layout's pipelines, each whole when all its nodes live.
    plan::Running running() const {
        return plan::runningOf(layout_, [this](int node) { return live_[static_cast<std::size_t>(node)] != 0; });
    }
    // The regroup for the live nodes now, keeping the whole pipelines.
    plan::Regroup regroupNow() {
        const std::uint32_t live = liveCount();
        plan::Regroup next = plan::regroup(plan_, live, running(), regroupFor(live));
        if (next.replanned) ++result_.replans;
        return next;
    }

    // Switches to `inst` on the live nodes as the run does (keeping layers in
    // place where it can, and the kept pipelines on their nodes); returns the
    // bytes it moves and the seconds its migration takes: the node that
    // receives most, at the inter-node bandwidth.
    struct Switch {
        double bytes = 0.0, seconds = 0.0;
    };
    Switch switchTo(const plan::Instantiation& inst, bool keepLayers, const plan::Regroup* next = nullptr) {
        const auto& ids = liveIds_;
        const auto& ranks = liveRanks_;
        const auto micro = plan_.microBatch;
        const auto global = plan_.globalMicrobatches * plan_.microBatch;
        Switch moved;
        if (!keepLayers) {
            layout_ = plan::placeInstantiation(plan_.templates, inst, ids, ranks, micro, global);
        } else {
            auto keep = plan::holdingsOfNodes(layout_, ranks, setup_.layerBytes);
            if (next)
                keep.keptNodes = plan::pinnedNodes(layout_, *next, [this](int node) { return live_[static_cast<std::size_t>(node)] != 0; });
            // Only nodes that are not kept can receive anything.
            std::vector<bool> kept(nodes_, false);
            // (Kept whole: every position pinned and the same template; those receive nothing.)
            if (next)
                for (std::size_t i = 0; i < next->keptFrom.size(); ++i) {
                    const auto& was = layout_.pipelines[next->keptFrom[i]];
                    const auto& pins = keep.keptNodes[i];
                    if (was.nodes == next->instantiation.pipelines[i].nodes &&
                        was.without == next->instantiation.pipelines[i].without &&
                        std::find(pins.begin(), pins.end(), -1) == pins.end())
                        for (int n : pins) kept[static_cast<std::size_t>(n)] = true;
                }
            plan::Layout next = plan::placeInstantiation(plan_.templates, inst, ids, ranks, micro, global, &keep);
            const auto received = plan::bytesToMoveByNode(next, ranks, keep);
            double most = 0;  // the node that receives most
            for (std::size_t n = 0; n < ranks.size(); ++n) {
                if (kept[static_cast<std::size_t>(ids[n])]) continue;
                most = std::max(most, received[n]);
                moved.bytes += received[n];
            }
            layout_ = std::move(next);
            result_.bytesMigrated += moved.bytes;
            moved.seconds = most / costs_.interBandwidth.value;
        }
        // Every switch, as diag.h5 records one (a spare in a failed node's place leaves the same shares).
        result_.layouts.push_back({now_, plan::sharesOf(inst)});
        inst_ = inst;
        step_ = stepOf(inst);
        return moved;
    }

    // The bytes of layers the ranks of `node` hold in the running layout (weights and moments).
    double holdingsOf(std::uint32_t node) const {
        double bytes = 0;
        for (std::uint32_t i = 0; i < setup_.ranksPerNode; ++i) {
            const auto role = layout_.role(static_cast<int>(node * setup_.ranksPerNode + i));
            if (role.idle()) continue;
            for (std::uint32_t l = role.firstLayer; l < role.endLayer; ++l) bytes += setup_.layerBytes[l] / role.width;
        }
        return bytes;
    }

    void start(bool requeued) {
        setAllLive();
        returns_ = {};
        failedSinceStart_ = 0;
        switchTo(plan_.instantiation, false);
        setTolerance(plan::toleranceOf(plan_.instantiation));
        if (costs_.firstStep.value > 0) stalls_.push_back({costs_.firstStep.value, &LostTime::firstSteps, requeued});
        if (!requeued) mark();
    }

    // Records the state at now_ for the plot.
    // (Checkpoint stalls count as running here: they are short, and there are many.)
    void mark() {
        const TimelinePoint point{now_, phase_ == Phase::Running ? rate() : 0.0, tolerance_, liveCount()};
        if (!result_.timeline.empty()) {
            const auto& last = result_.timeline.back();
            if (last.tokensPerSecond == point.tokensPerSecond && last.tolerance == point.tolerance &&
                last.liveNodes == point.liveNodes)
                return;
        }
        result_.timeline.push_back(point);
    }

    // Time passes: stalls are charged to their causes, training advances,
    // checkpoints are taken and committed.
    void advanceTo(double until) {
        while (now_ < until && !finished_) {
            if (!stalls_.empty()) {
                auto& stall = stalls_.front();
                const double dt = std::min(stall.seconds, until - now_);
                result_.lost.*stall.cause += dt;
                belowF(dt);
                now_ += dt;
                stall.seconds -= dt;
                if (stall.seconds <= 1e-12) {
                    stalls_.pop_front();
                    if (stalls_.empty()) {
                        phase_ = Phase::Running;
                        mark();
                    }
                }
                continue;
            }
            const double s = stepSeconds();
            double reach = kNever, next = 0;
            if (setup_.checkpointEvery > 0) {
                next = (std::floor(steps_ / double(setup_.checkpointEvery) + 1e-9) + 1) * double(setup_.checkpointEvery);
                reach = now_ + (next - steps_) * s;
            }
            if (pending_.time <= std::min(until, reach)) {
                committed_ = pending_.step;
                pending_ = {kNever, 0};
            }
            const double finish = setup_.stopAtSteps > 0 ? now_ + (setup_.stopAtSteps - steps_) * s : kNever;
            const double end = std::min({until, reach, finish});
            const double dt = end - now_;
            const double ref = setup_.referenceTokensPerSecond;
            result_.lost.redundancy += dt * (ref - startRate_) / ref;
            result_.lost.degraded += dt * (startRate_ - rate()) / ref;
            belowF(dt);
            steps_ += dt / s;
            now_ = end;
            if (end == finish) {
                steps_ = setup_.stopAtSteps;  // not a rounding short of it
                finished_ = true;
            } else if (end == reach) {
                checkpoint(next);
            }
        }
    }

    void belowF(double dt) {
        if (tolerance_ < plan_.f) result_.belowFSeconds += dt;
    }

    void checkpoint(double step) {
        steps_ = step;
        ++result_.checkpoints;
        // Every rank copies (or writes) its own layers, each pipeline the whole state: the pipeline with the
        // fewest ranks holds the most per rank, and the stall lasts as long as its copy.
        std::size_t fewest = 0;
        for (const auto& pipeline : layout_.pipelines)
            if (!pipeline.ranks.empty()) fewest = fewest == 0 ? pipeline.ranks.size() : std::min(fewest, pipeline.ranks.size());
        const double ranks = double(std::max<std::size_t>(1, fewest));
        const double write = stateBytes_ / costs_.writeBandwidth.value;
        const double stall = setup_.backgroundCheckpoints ? stateBytes_ / ranks / costs_.hostCopyBandwidth.value : write;
        const double commit = now_ + stall + (setup_.backgroundCheckpoints ? write : 0.0);
        // A write still running when the next begins: the next waits for it (one in flight at a time).
        const double wait = pending_.time < kNever ? std::max(0.0, pending_.time - now_) : 0.0;
        if (pending_.time <= now_ + wait) committed_ = pending_.step;
        pending_ = {commit + wait, static_cast<std::uint64_t>(step)};
        stalls_.push_back({stall + wait, &LostTime::checkpoints});
    }

    void handleReturnsUntil(double until) {
        while (!finished_ && !returns_.empty() && returns_.top().first <= until) {
            const auto [time, node] = returns_.top();
            returns_.pop();
            advanceTo(time);
            if (finished_) break;
            admit(node);
        }
    }

    void admit(std::uint32_t node) {
        if (live_[node]) return;
        setLive(node, true);
        if (phase_ == Phase::Requeued) return;
        ++result_.admissions;
        stalls_.push_back({costs_.admission.value, &LostTime::admissions});
        phase_ = Phase::Recovering;
        const plan::Regroup next = regroupNow();
        // The admission's rule: the new nodes join pipelines when the regroup for
        // the nodes now live is not the layout running; otherwise they wait as spares.
        if (next.possible && !plan::runs(layout_, next.instantiation)) {
            const Switch moved = switchTo(next.instantiation, true, &next);
            stalls_.push_back({moved.seconds, &LostTime::migration});
        }
        setTolerance(next.possible ? next.tolerance : tolerance_);
        mark();
    }

    void setTolerance(std::uint32_t t) {
        if (setup_.policy == Policy::FPerRun) t = std::min<std::uint32_t>(t, plan_.f - std::min(plan_.f, failedSinceStart_));
        if (setup_.policy == Policy::CheckpointRestart) t = 0;
        tolerance_ = t;
        result_.minTolerance = std::min(result_.minTolerance, t);
    }

    // Whether every layer still has a holder on a live node: the recovery's own test.
    bool layersSurvive() const {
        std::vector<int> live;
        for (const auto& ranks : liveRanks_) live.insert(live.end(), ranks.begin(), ranks.end());
        return plan::layersWithoutLiveHolder(layout_, identity(), live).empty();
    }
    // The layout's ranks are start-up ranks: node n has ranks [n * ranks per node, (n + 1) * ranks per node).
    const std::vector<int>& identity() const {
        if (identity_.size() != std::size_t(nodes_) * setup_.ranksPerNode) {
            identity_.resize(std::size_t(nodes_) * setup_.ranksPerNode);
            for (std::size_t r = 0; r < identity_.size(); ++r) identity_[r] = static_cast<int>(r);
        }
        return identity_;
    }

    void fail(const FailureEvent& failure) {
        std::vector<std::uint32_t> hit;
        for (auto n : failure.nodes)
            if (n < nodes_ && live_[n]) hit.push_back(n);
        if (hit.empty()) return;
        ++result_.failures;
        result_.failureTimes.push_back(now_);
        if (phase_ == Phase::Requeued) {
            // The scheduler gives the requeued job a healthy node in its place; a failure
            // during the start-up or the restore starts them again.
            if (!stalls_.empty() && stalls_.front().restartable) {
                stalls_.clear();
                restartStalls();
            }
            return;
        }
        for (auto n : hit) result_.failedHoldingBytes += holdingsOf(n);
        for (auto n : hit) {
            setLive(n, false);
            if (costs_.repair.value > 0) returns_.push({now_ + costs_.repair.value, n});
        }
        if (phase_ == Phase::Running && stalls_.empty()) {
            // The step under way is lost and replayed.
            const double done = std::floor(steps_ + 1e-9);
            result_.lost.replay += (steps_ - done) * setup_.tokensPerStep / setup_.referenceTokensPerSecond;
            steps_ = done;
        }
        failedSinceStart_ += static_cast<std::uint32_t>(hit.size());
        double detect = failure.hang ? costs_.detectHungAt(step_) : costs_.detectEnded.value;
        if (setup_.policy == Policy::CheckpointRestart) return requeue(detect, /*layersSurvive=*/false);
        // A host lost whole: where it still answers (its processes and daemon ended, their connections reset),
        // kiln's launch relay keeps the loss from Open MPI 5.0's runtime and the job recovers in place, as for a
        // node. One gone silent (power, a cut link) is recovered in place too once the heartbeat detector has
        // declared all its ranks failed everywhere; if the survivors' wait reaches its deadline first, the job
        // ends for a requeue from the last committed checkpoint, nothing written on the way out.
        if (failure.host && failure.hang) {
            const double deadline = costs_.silentHostDeadlineAt(step_);
            if (costs_.silentHost.value > deadline) {
                ++result_.hostRequeues;
                return requeue(deadline, false);
            }
            detect = costs_.silentHost.value;
        }
        if (!layersSurvive()) return requeue(detect, false);
        if (setup_.policy == Policy::FPerRun && failedSinceStart_ > plan_.f) return requeue(detect, true);
        const plan::Regroup next = regroupNow();
        if (!next.possible) return requeue(detect, true);
        phase_ = Phase::Recovering;
        stalls_.push_back({detect, &LostTime::detection});
        stalls_.push_back({costs_.recovery.value, &LostTime::recovery});
        const Switch moved = switchTo(next.instantiation, true, &next);
        result_.failureBytesMigrated += moved.bytes;
        stalls_.push_back({moved.seconds, &LostTime::migration});
        ++result_.survivedInPlace;
        setTolerance(next.tolerance);
        mark();
    }

    void restartStalls() {
        // Every pipeline reads the whole model.
        const double pipelines = double(std::max<std::size_t>(1, plan_.instantiation.pipelines.size()));
        stalls_.push_back({costs_.startup.value, &LostTime::requeues, true});
        stalls_.push_back({stateBytes_ * pipelines / costs_.readBandwidth.value, &LostTime::requeues, true});
    }

    // Beyond what the policy recovers in place: the job stops and is requeued.
    // With every layer on a survivor it first writes a checkpoint of the step
    // (kiln's stop beyond f); otherwise the last committed checkpoint is restored.
    void requeue(double detect, bool checkpointNow) {
        ++result_.requeues;
        phase_ = Phase::Requeued;
        stalls_.clear();
        stalls_.push_back({detect, &LostTime::detection});
        if (checkpointNow) {
            stalls_.push_back({stateBytes_ / costs_.writeBandwidth.value, &LostTime::requeues});
            committed_ = static_cast<std::uint64_t>(std::floor(steps_ + 1e-9));
        } else {
            if (pending_.time <= now_) committed_ = pending_.step;
            result_.lost.redone += (steps_ - double(committed_)) * setup_.tokensPerStep / setup_.referenceTokensPerSecond;
            steps_ = double(committed_);
        }
        pending_ = {kNever, 0};
        stalls_.push_back({costs_.requeueWait.value, &LostTime::queue});
        restartStalls();
        start(/*requeued=*/true);
        mark();
    }

    const plan::RunPlan& plan_;
    const SimCosts& costs_;
    RunSetup setup_;
    std::uint32_t nodes_ = 0;
    std::vector<char> live_;
    std::vector<int> liveIds_;                   // the live nodes, ascending
    std::vector<std::vector<int>> liveRanks_;    // and their ranks
    mutable std::vector<int> identity_;
    std::priority_queue<std::pair<double, std::uint32_t>, std::vector<std::pair<double, std::uint32_t>>, std::greater<>>
        returns_;
    std::map<std::uint32_t, plan::Regroup> regroups_;
    plan::Instantiation inst_;
    plan::Layout layout_;
    Phase phase_ = Phase::Running;
    std::deque<Stall> stalls_;
    double now_ = 0.0, steps_ = 0.0, step_ = 1.0, startRate_ = 0.0, stateBytes_ = 0.0;
    std::uint64_t committed_ = 0;
    struct Pending {
        double time;
        std::uint64_t step;
    } pending_{kNever, 0};
    std::uint32_t tolerance_ = 0, failedSinceStart_ = 0;
    bool finished_ = false;
    SimResult result_;
};

}  // namespace

SimResult simulate(const plan::RunPlan& plan, const SimCosts& costs, const std::vector<FailureEvent>& failures,
                   const RunSetup& setup) {
    if (setup.referenceTokensPerSecond <= 0 || setup.tokensPerStep <= 0)
        throw Error("simulate: no reference throughput (a plan without pipelines?)", ErrorScope::ThisRank);
    return Simulation(plan, costs, setup).run(failures);
}

}  // namespace kiln::sim
