// The run's checkpoints, owned in one place: the directory's store, the writer (now, or in the background when
// the deck says so), the fault injection points of a write, and the words a written one is reported with.
// The trainer says what a checkpoint holds (`Contents`) and where it is reported (`Written`); when one is taken
// is the trainer's boundary. Private to train/.
#pragma once

#include "kiln/fault/fault_injector.hpp"
#include "kiln/train/checkpoint_manager.hpp"

#include <mpi.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <string>

namespace kiln::train {

class RunCheckpoints {
public:
    // What a checkpoint of the run holds now: the layers as `holders` hold them, the optimizer, the cursor.
    using Contents = std::function<CheckpointManager::Source(LayerHolders holders)>;
    // A checkpoint written (`background`: by the background writer, published now).
    using Written = std::function<void(const CheckpointWrite& done, bool background)>;

    // `background` and `parallel`: the deck's checkpoint.background and checkpoint.parallel.
    RunCheckpoints(std::filesystem::path dir, std::uint64_t keep, bool background, bool parallel, Contents contents,
                   Written written);
    RunCheckpoints(const RunCheckpoints&) = delete;
    RunCheckpoints& operator=(const RunCheckpoints&) = delete;

    CheckpointStore& store() { return store_; }
    const CheckpointStore& store() const { return store_; }
    // The fault injection points of every write from now on (none until armed).
    void arm(std::shared_ptr<fault::FaultInjector> injector) { injector_ = std::move(injector); }

    bool pending() const { return manager_.pending(); }
    bool writeEnded() const { return manager_.writeEnded(); }
    // A background write in progress given up (a failure): `latest` stays the previous one.
    void abandon() { manager_.abandon(); }

    // Collective over `comm`: checkpoint `step` written now by `holders` (a pending one published first).
    void write(MPI_Comm comm, std::uint64_t step, const LayerHolders& holders);
    // Collective over `comm`: the periodic checkpoint of `step`, in the background when the deck says so
    // (checkpoint.background with checkpoint.parallel), else now.
    void start(MPI_Comm comm, std::uint64_t step, const LayerHolders& holders);
    // Collective over `comm`: the pending one published once every part is written; nothing when none is.
    void complete(MPI_Comm comm);

    // How a written checkpoint is told: the stall, and for a background one this rank's part.
    static std::string describe(const CheckpointWrite& done, bool background);

private:
    CheckpointManager::Hooks hooks(std::uint64_t step) const;

    // The injector outlives the writer (a background write's thread calls it): declared first.
    std::shared_ptr<fault::FaultInjector> injector_;
    CheckpointStore store_;
    CheckpointManager manager_;  // writes into store_
    bool background_;
    Contents contents_;
    Written written_;
};

}  // namespace kiln::train
