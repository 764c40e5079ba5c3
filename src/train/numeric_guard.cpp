#include "numeric_guard.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace kiln::train {

NumericPolicy numericPolicyFromDeck(const config::Deck& deck) {
    NumericPolicy p;
    p.check = deck.flag("numerics.check");
    p.lossSpike = deck.real("numerics.loss_spike");
    p.normSpike = deck.real("numerics.grad_spike");
    p.window = static_cast<std::uint32_t>(deck.integer("numerics.window"));
    p.history = static_cast<std::uint32_t>(deck.integer("numerics.min_history"));
    p.skipRepeated = deck.text("numerics.on_repeat") == "skip";
    p.compareEvery = static_cast<std::uint64_t>(deck.integer("numerics.compare_every"));
    p.sentLimit = deck.real("numerics.activation_limit");
    p.rollback = deck.flag("numerics.rollback");
    return p;
}

const char* numericKindName(NumericVerdict::Kind kind) {
    switch (kind) {
        case NumericVerdict::Kind::Healthy: return "healthy";
        case NumericVerdict::Kind::NonFinite: return "non_finite";
        case NumericVerdict::Kind::Spike: return "spike";
    }
    return "?";
}

bool sameFigure(double a, double b) {
    if (!std::isfinite(a) || !std::isfinite(b)) return !std::isfinite(a) && !std::isfinite(b);
    return a == b || std::abs(a - b) <= 1e-5 * std::max(std::abs(a), std::abs(b));
}

double NumericGuard::bound(const std::deque<double>& values, double factor) const {
    if (factor <= 0.0 || values.size() < std::max<std::uint32_t>(policy_.history, 1)) return 0.0;
    return factor * *std::max_element(values.begin(), values.end());
}

NumericVerdict NumericGuard::judge(double loss, double gradNorm, double lossBound, double normBound) const {
    NumericVerdict v;
    if (!policy_.check) return v;
    if (!std::isfinite(loss) || !std::isfinite(gradNorm)) {
        v.kind = NumericVerdict::Kind::NonFinite;
        v.what = !std::isfinite(loss) ? fmt::format("loss {}", loss) : fmt::format("gradient norm {}", gradNorm);
        return v;
    }
    const auto spike = [&](const char* name, double value, double bound, double factor) {
        v.kind = NumericVerdict::Kind::Spike;
        v.what = fmt::format("{} {:.6g}, above {:.6g} ({:g}x the largest of the last {} committed steps)", name, value,
                             bound, factor, policy_.window);
    };
    if (lossBound > 0.0 && loss > lossBound)
        spike("loss", loss, lossBound, policy_.lossSpike);
    else if (normBound > 0.0 && gradNorm > normBound)
        spike("gradient norm", gradNorm, normBound, policy_.normSpike);
    return v;
}

int firstDifferingRank(const plan::Layout& layout, const StepFigures& a, const StepFigures& b) {
    const auto differs = [](const std::vector<double>& x, const std::vector<double>& y, int r) {
        const auto i = static_cast<std::size_t>(r);
        return i < x.size() && i < y.size() && !sameFigure(x[i], y[i]);
    };
    for (const auto& p : layout.pipelines) {
        const std::uint32_t stages = p.stages();
        if (stages == 0) continue;
        for (std::uint32_t s = 0; s + 1 < stages; ++s)
            for (int r : p.stageRanks(s))
                if (differs(a.forward, b.forward, r)) return r;
        for (int r : p.stageRanks(stages - 1))
            if (differs(a.loss, b.loss, r)) return r;
        for (std::uint32_t s = stages - 1; s > 0; --s)
            for (int r : p.stageRanks(s))
                if (differs(a.backward, b.backward, r)) return r;
    }
    return -1;
}

NumericVerdict NumericGuard::judgeSent(double peak, int rank) const {
    NumericVerdict v;
    if (!policy_.check || policy_.sentLimit <= 0.0 || peak <= policy_.sentLimit) return v;
    v.kind = std::isfinite(peak) ? NumericVerdict::Kind::Spike : NumericVerdict::Kind::NonFinite;
    v.what = fmt::format("rank {} sent a value of magnitude {:.3g} to a neighbouring stage (numerics.activation_limit = "
                         "{:g})",
                         rank, peak, policy_.sentLimit);
    return v;
}

void NumericGuard::committed(double loss, double gradNorm) {
    losses_.push_back(loss);
    norms_.push_back(gradNorm);
    while (losses_.size() > policy_.window) losses_.pop_front();
    while (norms_.size() > policy_.window) norms_.pop_front();
}

void NumericGuard::restore(const std::vector<double>& losses, const std::vector<double>& norms) {
    losses_.assign(losses.begin(), losses.end());
    norms_.assign(norms.begin(), norms.end());
    while (losses_.size() > policy_.window) losses_.pop_front();
    while (norms_.size() > policy_.window) norms_.pop_front();
}

}  // namespace kiln::train
