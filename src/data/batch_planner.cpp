#include "kiln/data/batch_planner.hpp"

#include "kiln/base/hash.hpp"
#include "kiln/base/error.hpp"
#include "kiln/data/keyed_permutation.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace kiln::data {
namespace {

std::vector<double> weightsOf(const LoaderSpec& spec) {
    std::vector<double> w;
    for (const auto& s : spec.sources) w.push_back(s.weight);
    return w;
}

}  // namespace

BatchPlanner::BatchPlanner(LoaderSpec spec, Corpus& corpus)
    : spec_(std::move(spec)), corpus_(corpus), schedule_(weightsOf(spec_)), orders_(spec_.sources.size()) {}

Cursor BatchPlanner::initial() const {
    Cursor c;
    c.weightsHash = spec_.weightsHash();
    for (const auto& s : spec_.sources) c.sources.push_back({s.name});
    return c;
}

Cursor BatchPlanner::resume(const Cursor& saved) const {
    Cursor c = saved;
    c.sources.clear();
    for (const auto& s : spec_.sources) {
        const SourceCursor* old = saved.find(s.name);
        c.sources.push_back(old ? *old : SourceCursor{s.name});
    }
    for (const auto& old : saved.sources)
        if (!c.find(old.name)) c.sources.push_back(old);  // retired: kept, never picked
    if (saved.weightsHash != spec_.weightsHash()) {
        c.weightsHash = spec_.weightsHash();
        c.segmentStart = c.samples;
        for (auto& s : c.sources) s.segmentBase = s.samples;
    }
    return c;
}

const EpochOrder& BatchPlanner::order(std::size_t source, std::uint64_t epoch) {
    auto& slot = orders_[source];
    if (!slot || slot->first != epoch) {
        const auto key = epochKey(spec_.seed, spec_.sources[source].name.c_str(), epoch);
        slot.emplace(epoch, EpochOrder(corpus_.reader(source).numDocuments(), spec_.blockDocs, spec_.windowBlocks, key));
    }
    return slot->second;
}

std::uint64_t BatchPlanner::spanLength(std::size_t source, std::uint64_t epoch, std::uint64_t docPos) {
    return corpus_.reader(source).documentLength(order(source, epoch).docAt(docPos)) + 1;  // + EOS
}

std::pair<std::uint64_t, std::uint64_t> BatchPlanner::document(std::size_t source, std::uint64_t epoch,
                                                               std::uint64_t docPos) {
    if (walk_.source == source && walk_.epoch == epoch && docPos >= walk_.firstPos &&
        docPos - walk_.firstPos < walk_.docs.size())
        return walk_.docs[docPos - walk_.firstPos];
    const std::uint64_t doc = order(source, epoch).docAt(docPos);
    return {doc, corpus_.reader(source).documentLength(doc)};
}

SampleStart BatchPlanner::takeSample(std::size_t source, SourceCursor& c) {
    const std::uint64_t docs = corpus_.reader(source).numDocuments();
    for (;;) {
        // Walk seqLen tokens from the cursor; a sample needs one more token after them.
        const SampleStart start{static_cast<std::uint32_t>(source), c.epoch, c.docPos, c.tokenOffset};
        std::uint64_t docPos = c.docPos, offset = c.tokenOffset, need = spec_.seqLen, passed = 0;
        walk_.source = source;
        walk_.epoch = c.epoch;
        walk_.firstPos = c.docPos;
        walk_.docs.clear();
        while (docPos < docs) {
            const std::uint64_t doc = order(source, c.epoch).docAt(docPos);
            walk_.docs.emplace_back(doc, corpus_.reader(source).documentLength(doc));
            const std::uint64_t span = walk_.docs.back().second + 1;  // + EOS
            if (offset + need < span) break;  // ends inside this span, with a token to spare
            need -= span - offset;
            offset = 0;
            ++docPos;
            ++passed;
            if (need == 0 && docPos < docs) break;
        }
        if (docPos < docs) {
            c.docPos = docPos;
            c.tokenOffset = offset + need;
            c.docsDone += passed;
            c.samples += 1;
            return start;
        }
        // The rest of the epoch is shorter than a sample: drop it, start the next epoch.
        // The token under the cursor was the last target of the previous sample
        // (unless no sample was taken yet), so it is not dropped.
        std::uint64_t tail = 0;
        for (std::uint64_t p = c.docPos; p < docs; ++p) tail += spanLength(source, c.epoch, p);
        const bool atEpochStart = c.docPos == 0 && c.tokenOffset == 0;
        c.tokensDropped += tail - c.tokenOffset - (atEpochStart ? 0 : 1);
        c.docsDone += docs - c.docPos;
        c.epoch += 1;
        c.docPos = 0;
        c.tokenOffset = 0;
    }
}

StepPlan BatchPlanner::plan(const Cursor& at, const SampleTaken& taken) {
    StepPlan plan{at.step, {}, at};
    Cursor& c = plan.next;
    const std::size_t active = spec_.sources.size();
    std::vector<std::uint64_t> counts(active);
    for (std::size_t s = 0; s < active; ++s) counts[s] = c.sources[s].samples - c.sources[s].segmentBase;
    // Consecutive samples of one source are consecutive windows of its stream.
    // A keyed shuffle of the batch spreads them, so that any slice of the batch
    // (a pipeline's share, a microbatch) holds a fair mix of sources and documents.
    const KeyedPermutation shuffle(spec_.globalBatch, base::mix64(spec_.seed ^ base::mix64(at.step + 0x62617463ull)));
    plan.samples.reserve(spec_.globalBatch);
    for (std::uint64_t i = 0; i < spec_.globalBatch; ++i) {
        const std::size_t s = schedule_.pick(counts, c.samples - c.segmentStart);
        plan.samples.push_back(takeSample(s, c.sources[s]));
        if (taken) taken(shuffle(i), plan.samples.back());
        ++counts[s];
        ++c.samples;
    }
    std::vector<SampleStart> ordered(plan.samples.size());
    for (std::uint64_t i = 0; i < ordered.size(); ++i) ordered[shuffle(i)] = plan.samples[i];
    plan.samples = std::move(ordered);
    ++c.step;
    return plan;
}

void BatchPlanner::readSample(const SampleStart& sample, std::uint32_t* out) {
    auto& reader = corpus_.reader(sample.source);
    const std::uint32_t eos = corpus_.tokenizer().eosId;
    std::uint64_t docPos = sample.docPos, offset = sample.tokenOffset, need = spec_.seqLen + 1;
    while (need > 0) {
        const auto [doc, length] = document(sample.source, sample.epoch, docPos);
        if (offset < length) {
            const std::uint64_t n = std::min(need, length - offset);
            reader.readTokens(doc, offset, n, out);
            out += n;
            need -= n;
            offset += n;
        }
        if (need > 0 && offset == length) {
            *out++ = eos;
            --need;
        }
        ++docPos;
        offset = 0;
    }
}

}  // namespace kiln::data
