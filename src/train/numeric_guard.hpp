// A step's numbers checked before the optimizer applies them (issue 66): a loss or gradient norm that is not
// finite, or far above the recent steps', is flagged, and the step is run again to tell a transient fault (the
// rerun disagrees) from the data or the model (it agrees). The verdict is a pure function of what every rank
// sees alike after the step's one collective (the summed loss and norm, and the largest bounds any rank sent),
// so every rank takes the same one without another agreement.
#pragma once

#include "kiln/config/deck.hpp"
#include "kiln/plan/layout.hpp"

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

namespace kiln::train {

struct NumericPolicy {
    bool check = true;             // numerics.check
    double lossSpike = 0.0;        // numerics.loss_spike: flag a loss this many times the window's largest (0: never)
    double normSpike = 0.0;        // numerics.grad_spike: the same for the gradient norm
    std::uint32_t window = 100;    // numerics.window: committed steps remembered
    std::uint32_t history = 20;    // numerics.min_history: committed steps before spikes are judged
    bool skipRepeated = true;      // numerics.on_repeat: skip (true) or stop (false) when the rerun agrees
    std::uint64_t compareEvery = 100;  // numerics.compare_every: steps between replica comparisons (0: checkpoints only)
    double sentLimit = 1e12;       // numerics.activation_limit: the largest magnitude an activation or gradient sent may have
    bool rollback = true;          // numerics.rollback: an outvoted copy's steps trained again from the last checkpoint
};
NumericPolicy numericPolicyFromDeck(const config::Deck& deck);

struct NumericVerdict {
    enum class Kind { Healthy, NonFinite, Spike } kind = Kind::Healthy;
    std::string what;  // in words, for the log and diag.h5: "loss nan", "gradient norm 4.1e+09, 7.3e+04x ..."
    bool flagged() const { return kind != Kind::Healthy; }
};
const char* numericKindName(NumericVerdict::Kind kind);

// Two figures of one step computed twice: equal, both not finite, or within the rounding a device's
// non-deterministic kernels leave (relative 1e-5). On the CPU kiln's steps repeat bit for bit.
bool sameFigure(double a, double b);

// What each rank made of one run of a step, by rank: its loss sum (a last stage's slot 0), its share of the
// squared gradient norm, and the sums of what it sent forward and back.
struct StepFigures {
    std::vector<double> loss, norm, forward, backward;
};

// Where two runs of a step part: the rank that made the first difference, walking each pipeline forward (the
// first stage whose activations differ, its input having been the same; the last stage when only the loss
// does), then backward (the first stage, from the last, whose gradients differ). -1 when only the gradient sums
// differ (no stage's own output did) or nothing does.
int firstDifferingRank(const plan::Layout& layout, const StepFigures& first, const StepFigures& second);

class NumericGuard {
public:
    explicit NumericGuard(NumericPolicy policy) : policy_(policy) {}
    const NumericPolicy& policy() const { return policy_; }
    // The bounds this rank's history gives (0: too short to judge), sent with the step's collective: a process
    // that joined later and remembers less does not judge by less.
    double lossBound() const { return bound(losses_, policy_.lossSpike); }
    double normBound() const { return bound(norms_, policy_.normSpike); }
    // The step's loss (per target token) and gradient norm, against the largest bounds any rank sent.
    NumericVerdict judge(double loss, double gradNorm, double lossBound, double normBound) const;
    // The largest magnitude any rank sent to a neighbouring stage in the step (`rank` sent it): a value beyond
    // numerics.activation_limit, or not finite, is flagged. A norm layer can hide such a value from the loss (an
    // RMSNorm of a token holding 3e37 gives zeros, and the loss moves by 0.05 %), not from this.
    NumericVerdict judgeSent(double peak, int rank) const;
    // A committed step joins the history (a skipped one does not).
    void committed(double loss, double gradNorm);
    // The history, kept in checkpoints so that a resumed run judges its steps as the first attempt did.
    std::vector<double> losses() const { return {losses_.begin(), losses_.end()}; }
    std::vector<double> norms() const { return {norms_.begin(), norms_.end()}; }
    void restore(const std::vector<double>& losses, const std::vector<double>& norms);

private:
    double bound(const std::deque<double>& values, double factor) const;
    NumericPolicy policy_;
    std::deque<double> losses_, norms_;
};

}  // namespace kiln::train
