// When and how a run writes checkpoints: synchronously (the end of a run, a
// stop request, the beyond-f checkpoint) or in the background (periodic
// ones), in either file form (checkpoint.hpp). The training loop sees four
// calls; the protocol (snapshot, part files, agreement, index, `latest`) is
// here and in checkpoint_parts.hpp.
//
// A background checkpoint: start() copies this rank's share to host memory
// at a step boundary (the stall) and a thread writes the part file while
// training goes on; the loop asks writeEnded() every step (folded into the
// step's own collective), and once every rank's write has ended, complete()
// agrees that every part is in place and rank 0 publishes. A failure in the
// meantime abandons it: the previous `latest` stays, and the parts are
// removed with the temporaries after the recovery, and the trainer takes a
// checkpoint again (trainer_state.hpp, checkpointLost).
#pragma once

#include "kiln/train/checkpoint.hpp"
#include "kiln/train/checkpoint_parts.hpp"

#include <atomic>
#include <exception>
#include <functional>
#include <optional>
#include <thread>

namespace kiln::train {

struct CheckpointWrite {
    std::filesystem::path path;
    std::uint64_t step = 0;
    double stall = 0.0;  // seconds training waited: the snapshot, and any wait for the write
    double write = 0.0;  // seconds this rank's writer spent writing its part (rank 0: its own)
    std::uint64_t bytes = 0;  // this rank's part
    int writers = 0;          // ranks with a part (rank 0 knows)
};

class CheckpointManager {
public:
    // `parallel`: part files (format 2) rather than one file written by rank 0.
    CheckpointManager(CheckpointStore& store, bool parallel);
    ~CheckpointManager();
    CheckpointManager(const CheckpointManager&) = delete;
    CheckpointManager& operator=(const CheckpointManager&) = delete;

    // What a checkpoint is made of on this rank, as the trainer knows it.
    struct Source {
        model::Gpt* model;
        AdamW* optimizer;
        LayerHolders holders;  // of `comm`'s ranks
        data::Cursor cursor;
        data::CursorContext context;
        std::string deck;
        std::uint64_t lrDecaySteps = 0;
    };

    // Fault-injection points: `beforeCommit` on rank 0 before the index is
    // renamed into place, `duringWrite` in each writer after its first layer.
    struct Hooks {
        std::function<void()> beforeCommit, duringWrite;
    };
    // Collective over `comm`: checkpoint `step` written and published now
    // (after completing a pending background one).
    CheckpointWrite write(MPI_Comm comm, std::uint64_t step, const Source& source, const Hooks& hooks);
    // Collective over `comm`: the snapshot now, the part written in the
    // background. A pending one is completed first.
    void start(MPI_Comm comm, std::uint64_t step, const Source& source, const Hooks& hooks);
    bool pending() const { return pending_.has_value(); }
    // Whether this rank's part of the pending checkpoint is written (true when none is pending).
    bool writeEnded() const { return !pending_ || ended_.load(); }
    // Collective over `comm`: waits for this rank's write, agrees that every
    // part is in place and publishes (rank 0). A rank that could not write
    // its part makes every rank drop the checkpoint (a warning, not an error:
    // the next one may succeed). Throws ProcFailedError when a rank fails.
    std::optional<CheckpointWrite> complete(MPI_Comm comm);
    // After a failure: waits for the writer thread and forgets the checkpoint.
    void abandon();

private:
    void join();

    CheckpointStore& store_;
    bool parallel_;
    std::optional<CheckpointSnapshot> pending_;
    Hooks hooks_;
    CheckpointWrite progress_;
    std::thread writer_;
    std::atomic<bool> ended_{true};
    std::exception_ptr failure_;
};

}  // namespace kiln::train
