// The held-out evaluation's own state and rules, apart from the rest of the run: what it evaluates (data.eval_mix,
// its first train.eval_batches global batches), when one is due (train.eval_every, and after the last step),
// what the ranks must agree they evaluated, and the record it leaves. The collective loop over the running
// layout is the trainer's (trainer_eval.cpp); everything here is tested without MPI (test_held_out_evaluation).
// Private to train/.
#pragma once

#include "kiln/base/fingerprint.hpp"
#include "kiln/data/loader_spec.hpp"
#include "kiln/io/diag_file.hpp"

#include <cstdint>
#include <memory>

namespace kiln::data {
class Corpus;
}

namespace kiln::train {

class HeldOutEvaluation {
public:
    // None: no held-out sources.
    HeldOutEvaluation() = default;
    // `every` 0: after the last step only.
    HeldOutEvaluation(data::LoaderSpec spec, std::shared_ptr<data::Corpus> corpus, std::uint64_t every,
                      std::uint64_t batches);

    bool enabled() const { return !spec_.sources.empty(); }
    // Whether one is due after `steps` steps of a run that ends at `end`.
    bool due(std::uint64_t steps, std::uint64_t end) const;
    std::uint64_t batches() const { return batches_; }
    // Tokens one evaluation reads: every target of its batches.
    std::uint64_t tokens() const { return batches_ * spec_.globalBatch * spec_.seqLen; }
    const data::LoaderSpec& spec() const { return spec_; }
    const std::shared_ptr<data::Corpus>& corpus() const { return corpus_; }

    // What every rank must have evaluated alike: after how many steps, which batches and mix, in which fence
    // epoch (a straggler of an earlier attempt is fenced) and on which layout.
    base::Fingerprint fingerprint(std::uint64_t steps, std::uint64_t fenceEpoch, std::uint64_t layoutDigest) const;
    // The /eval record of an evaluation after `steps` steps whose summed cross-entropy was `lossSum`.
    io::EvalRecord record(std::uint64_t steps, double lossSum, double seconds) const;

private:
    data::LoaderSpec spec_;
    std::shared_ptr<data::Corpus> corpus_;
    std::uint64_t every_ = 0, batches_ = 0;
};

}  // namespace kiln::train
