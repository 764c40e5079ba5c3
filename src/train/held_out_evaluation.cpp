#include "held_out_evaluation.hpp"

#include <cmath>

namespace kiln::train {

HeldOutEvaluation::HeldOutEvaluation(data::LoaderSpec spec, std::shared_ptr<data::Corpus> corpus, std::uint64_t every,
                                     std::uint64_t batches)
    : spec_(std::move(spec)), corpus_(std::move(corpus)), every_(every), batches_(batches) {}

bool HeldOutEvaluation::due(std::uint64_t steps, std::uint64_t end) const {
    if (!enabled() || steps == 0) return false;
    return steps == end || (every_ > 0 && steps % every_ == 0);
}

base::Fingerprint HeldOutEvaluation::fingerprint(std::uint64_t steps, std::uint64_t fenceEpoch,
                                                 std::uint64_t layoutDigest) const {
    base::Fingerprint agreed("the held-out evaluation");
    agreed.add("steps", steps).add("batches", batches_).add("eval_mix", spec_.weightsHash());
    agreed.add("fence_epoch", fenceEpoch).add("layout", layoutDigest);
    return agreed;
}

io::EvalRecord HeldOutEvaluation::record(std::uint64_t steps, double lossSum, double seconds) const {
    io::EvalRecord out;
    out.step = steps;
    out.tokens = tokens();
    out.loss = out.tokens > 0 ? lossSum / double(out.tokens) : 0.0;
    out.perplexity = std::exp(out.loss);
    out.seconds = seconds;
    return out;
}

}  // namespace kiln::train
