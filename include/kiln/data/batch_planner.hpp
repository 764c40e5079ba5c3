// Global batches as a pure function of (spec, cursor): which source each
// sample comes from (the mix schedule) and where in that source's packed
// stream it starts. Planning reads only document lengths; tokens are read
// afterwards, for the slice of the batch a rank needs.
//
// Packing: an epoch of a source is its documents in epoch order, each
// followed by EOS, as one stream. Sample i of the epoch is tokens
// [i*seqLen, i*seqLen + seqLen + 1): consecutive samples share one token, so
// every token but the epoch's first is a training target exactly once. A tail
// too short for a whole sample is dropped (and counted) and the next epoch
// starts, with a new order.
#pragma once

#include "kiln/data/corpus.hpp"
#include "kiln/data/cursor.hpp"
#include "kiln/data/epoch_order.hpp"
#include "kiln/data/loader_spec.hpp"
#include "kiln/data/mix_schedule.hpp"
#include "kiln/data/source_reader.hpp"

#include <memory>
#include <optional>
#include <functional>
#include <vector>

namespace kiln::data {

struct SampleStart {
    std::uint32_t source = 0;  // index in the spec's sources
    std::uint64_t epoch = 0;
    std::uint64_t docPos = 0;
    std::uint64_t tokenOffset = 0;
};

struct StepPlan {
    std::uint64_t step = 0;
    std::vector<SampleStart> samples;  // the global batch, in order
    Cursor next;                       // the cursor once this step is committed
};

class BatchPlanner {
public:
    BatchPlanner(LoaderSpec spec, Corpus& corpus);

    const LoaderSpec& spec() const { return spec_; }
    // The cursor of a fresh run.
    Cursor initial() const;
    // A saved cursor continued under this spec: rows follow the spec's source
    // order (sources no longer in the mix keep their rows, after the others);
    // new sources start at zero; changed weights start a new segment.
    Cursor resume(const Cursor& saved) const;

    // The step at `at`. `taken(position, sample)` runs for each sample as
    // soon as it is planned (`position`: its place in the shuffled batch),
    // while the documents it walked are still the reader's open ones: a
    // rank reads its slice in the same pass, instead of walking the window
    // twice with twice the shards open.
    using SampleTaken = std::function<void(std::uint64_t position, const SampleStart& sample)>;
    StepPlan plan(const Cursor& at, const SampleTaken& taken = {});
    // The seqLen + 1 tokens of one sample.
    void readSample(const SampleStart& sample, std::uint32_t* out);

    // Samples per source of the current segment, for the schedule's check.
    double targetShare(std::size_t source) const { return schedule_.share(source); }

private:
    const EpochOrder& order(std::size_t source, std::uint64_t epoch);
    std::uint64_t spanLength(std::size_t source, std::uint64_t epoch, std::uint64_t docPos);
    // Moves `c` to the start of its source's next complete sample and returns it.
    SampleStart takeSample(std::size_t source, SourceCursor& c);
    // The document at `docPos` and its length without the EOS: from the last
    // sample's walk where it passed there (readSample right after planning
    // walks the same documents again), else looked up.
    std::pair<std::uint64_t, std::uint64_t> document(std::size_t source, std::uint64_t epoch, std::uint64_t docPos);

    LoaderSpec spec_;
    Corpus& corpus_;
    MixSchedule schedule_;
    std::vector<std::optional<std::pair<std::uint64_t, EpochOrder>>> orders_;  // per source: (epoch, order)
    // The documents (id, length) the last takeSample walked from `firstPos`.
    struct Walk {
        std::size_t source = 0;
        std::uint64_t epoch = 0, firstPos = 0;
        std::vector<std::pair<std::uint64_t, std::uint64_t>> docs;
    } walk_;
};

}  // namespace kiln::data
