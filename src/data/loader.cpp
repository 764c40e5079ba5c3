#include "kiln/data/loader.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <string_view>
#include <stdexcept>

namespace kiln::data {

// The read-ahead starts at the first setSlice() or current(), not here: a
// rank sliced right after (every rank of kiln run) read the whole first
// batches first, every rank of the job at once at start-up.
DataLoader::DataLoader(LoaderSpec spec, std::shared_ptr<Corpus> corpus, const Cursor& start)
    : corpus_(std::move(corpus)), planner_(std::move(spec), *corpus_), cursor_(start), count_(planner_.spec().globalBatch) {}

DataLoader::DataLoader(LoaderSpec spec, const Cursor& start)
    : DataLoader(spec, std::make_shared<Corpus>(spec), start) {}

DataLoader::~DataLoader() { stopThread(); }

void DataLoader::setSlice(std::uint64_t first, std::uint64_t count) {
    if (first + count > planner_.spec().globalBatch)
        throw std::invalid_argument(fmt::format("slice [{}, {}) is outside the global batch of {}", first, first + count,
                                                planner_.spec().globalBatch));
    stopThread();
    first_ = first;
    count_ = count;
    // A rank without a slice (a middle stage, a benched rank) plans every
    // batch but reads no token; a block of 64 documents holds none of a slice
    // of s of the batch with probability (1 - s)^64, 61 % below 1/128.
    // KILN_BLOCK_TOKENS_ON_DEMAND=off: every block read whole (the benchmark's baseline).
    static const bool allowed = [] {
        const char* v = std::getenv("KILN_BLOCK_TOKENS_ON_DEMAND");
        return !(v && std::string_view(v) == "off");
    }();
    const bool small = allowed && (count == 0 || count * kTokensOnDemandBelow < planner_.spec().globalBatch);
    for (std::size_t source = 0; source < corpus_->size(); ++source) corpus_->reader(source).setBlockTokensOnDemand(small);
    startThread();
}

void DataLoader::startThread() {
    std::lock_guard lock(mutex_);
    ready_.clear();
    failure_ = nullptr;
    stop_ = false;
    thread_ = std::thread(&DataLoader::run, this, cursor_, first_, count_);
}

void DataLoader::stopThread() {
    {
        std::lock_guard lock(mutex_);
        stop_ = true;
    }
    changed_.notify_all();
    if (thread_.joinable()) thread_.join();
}

// The read-ahead thread: plans step after step from `from` (planning is
// deterministic, so its plans are the ones the committed cursor would give)
// and reads this rank's slice of each, at most prefetchSteps ahead.
void DataLoader::run(Cursor from, std::uint64_t first, std::uint64_t count) {
    try {
        const std::uint64_t length = planner_.spec().seqLen + 1;
        for (;;) {
            Ready next;
            {
                std::unique_lock lock(mutex_);
                changed_.wait(lock, [&] { return stop_ || ready_.size() < planner_.spec().prefetchSteps; });
                if (stop_) return;
                if (!spareTokens_.empty()) {
                    next.batch.tokens = std::move(spareTokens_.back());
                    spareTokens_.pop_back();
                }
            }
            Batch& b = next.batch;
            b.first = first;
            b.count = count;
            b.sampleLength = length;
            b.tokens.resize(count * length);
            b.sourceOfSample.resize(count);
            // This rank's samples are read as they are planned (see BatchPlanner::plan).
            next.plan = planner_.plan(from, [&](std::uint64_t position, const SampleStart& sample) {
                if (position < first || position >= first + count) return;
                planner_.readSample(sample, b.tokens.data() + (position - first) * length);
                b.sourceOfSample[position - first] = sample.source;
            });
            from = next.plan.next;
            b.step = next.plan.step;
            {
                std::lock_guard lock(mutex_);
                if (stop_) return;
                ready_.push_back(std::move(next));
            }
            changed_.notify_all();
        }
    } catch (...) {
        std::lock_guard lock(mutex_);
        failure_ = std::current_exception();
        changed_.notify_all();
    }
}

const Batch& DataLoader::current() {
    if (!thread_.joinable()) startThread();
    const auto start = std::chrono::steady_clock::now();
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return !ready_.empty() || failure_; });
    if (ready_.empty() && failure_) std::rethrow_exception(failure_);
    waitLast_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    waitTotal_ += waitLast_;
    return ready_.front().batch;
}

void DataLoader::commit() {
    current();  // the step being committed must have been planned
    {
        std::lock_guard lock(mutex_);
        cursor_ = ready_.front().plan.next;
        if (spareTokens_.size() < 2) spareTokens_.push_back(std::move(ready_.front().batch.tokens));
        ready_.pop_front();
    }
    changed_.notify_all();
}

std::vector<SourceAccount> DataLoader::accounts() const {
    std::vector<SourceAccount> out;
    const std::uint64_t segmentSamples = cursor_.samples - cursor_.segmentStart;
    for (std::size_t s = 0; s < cursor_.sources.size(); ++s) {
        const auto& c = cursor_.sources[s];
        SourceAccount a;
        a.name = c.name;
        a.targetShare = s < planner_.spec().sources.size() ? planner_.targetShare(s) : 0.0;
        a.realisedShare = segmentSamples ? double(c.samples - c.segmentBase) / double(segmentSamples) : 0.0;
        a.samples = c.samples;
        a.tokens = c.samples * planner_.spec().seqLen;
        a.documents = c.docsDone;
        a.epochs = c.epoch;
        a.tokensDropped = c.tokensDropped;
        out.push_back(a);
    }
    return out;
}

}  // namespace kiln::data
