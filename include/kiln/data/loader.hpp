// The data loader a training rank uses: the global batch of the committed
// step, for the slice of it this rank needs, read ahead by a background
// thread so that training does not wait. The cursor advances only on commit;
// until then current() keeps returning the same batch (a failed step is
// replayed with the same data).
#pragma once

#include "kiln/base/read_buffer.hpp"
#include "kiln/data/batch_planner.hpp"

#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

namespace kiln::data {

struct Batch {
    std::uint64_t step = 0;
    std::uint64_t first = 0;      // first sample of the global batch in this slice
    std::uint64_t count = 0;      // samples in this slice
    std::uint64_t sampleLength = 0;  // seqLen + 1
    ReadBuffer<std::uint32_t> tokens;          // count x sampleLength, every one read (never zeroed first)
    std::vector<std::uint32_t> sourceOfSample;  // count
};

// Per source: what has been consumed, and the realised mix against the target.
struct SourceAccount {
    std::string name;
    double targetShare = 0.0;    // of the current weight segment
    double realisedShare = 0.0;  // of the current weight segment
    std::uint64_t samples = 0, tokens = 0, documents = 0, epochs = 0, tokensDropped = 0;
};

// An empty slice, or one below 1/kTokensOnDemandBelow of the global batch,
// reads a shuffle block's tokens only when one of its documents is in the
// slice (ReaderOptions::blockTokensOnDemand; above, a second opening for
// most blocks would cost more than the tokens it spares).
inline constexpr std::uint64_t kTokensOnDemandBelow = 128;

class DataLoader {
public:
    // `start`: a cursor of this spec (initial() or resume()). The corpus is
    // shared with whoever opened it (planning the first cursor, the trainer).
    DataLoader(LoaderSpec spec, std::shared_ptr<Corpus> corpus, const Cursor& start);
    // Opens the spec's sources in this process alone.
    DataLoader(LoaderSpec spec, const Cursor& start);
    ~DataLoader();
    DataLoader(const DataLoader&) = delete;
    DataLoader& operator=(const DataLoader&) = delete;

    // Which samples of each global batch this rank reads. Restarts read-ahead.
    void setSlice(std::uint64_t first, std::uint64_t count);
    // The batch of the committed step (waits for the read-ahead if needed).
    const Batch& current();
    // The step is committed: the cursor advances, the next batch becomes current.
    void commit();

    const Cursor& cursor() const { return cursor_; }
    const LoaderSpec& spec() const { return planner_.spec(); }
    const TokenizerInfo& tokenizer() const { return corpus_->tokenizer(); }
    // Seconds current() has waited for data, in total and in the last call.
    double waitSeconds() const { return waitTotal_; }
    double lastWaitSeconds() const { return waitLast_; }
    std::vector<SourceAccount> accounts() const;

private:
    struct Ready {
        StepPlan plan;
        Batch batch;
    };
    void startThread();
    void stopThread();
    void run(Cursor from, std::uint64_t first, std::uint64_t count);

    std::shared_ptr<Corpus> corpus_;
    BatchPlanner planner_;
    Cursor cursor_;
    std::uint64_t first_ = 0, count_ = 0;

    std::mutex mutex_;
    std::condition_variable changed_;
    std::deque<Ready> ready_;
    // Token buffers of committed batches, for the next ones: a fresh one a
    // step was a page-faulted allocation of the whole slice (0.5 MB for 64 x
    // 2049), zeroed and then overwritten, 5 % of the loader's time.
    std::vector<ReadBuffer<std::uint32_t>> spareTokens_;
    std::exception_ptr failure_;
    bool stop_ = false;
    std::thread thread_;
    double waitTotal_ = 0.0, waitLast_ = 0.0;
};

}  // namespace kiln::data
