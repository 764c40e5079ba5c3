#include "run_checkpoints.hpp"

#include "checkpoint_fault_hooks.hpp"

#include <fmt/format.h>

namespace kiln::train {

RunCheckpoints::RunCheckpoints(std::filesystem::path dir, std::uint64_t keep, bool background, bool parallel,
                               Contents contents, Written written)
    : store_(std::move(dir), keep), manager_(store_, parallel), background_(background && parallel),
      contents_(std::move(contents)), written_(std::move(written)) {}

CheckpointManager::Hooks RunCheckpoints::hooks(std::uint64_t step) const {
    if (!injector_) return {};
    return checkpointFaultHooks(injector_, step);
}

void RunCheckpoints::write(MPI_Comm comm, std::uint64_t step, const LayerHolders& holders) {
    if (manager_.pending()) complete(comm);  // a checkpoint waits for the one before it
    written_(manager_.write(comm, step, contents_(holders), hooks(step)), false);
}

void RunCheckpoints::start(MPI_Comm comm, std::uint64_t step, const LayerHolders& holders) {
    if (!background_) return write(comm, step, holders);
    if (manager_.pending()) complete(comm);
    manager_.start(comm, step, contents_(holders), hooks(step));
}

void RunCheckpoints::complete(MPI_Comm comm) {
    if (const auto done = manager_.complete(comm)) written_(*done, true);
}

std::string RunCheckpoints::describe(const CheckpointWrite& done, bool background) {
    const std::string writers = done.writers > 1 ? fmt::format(", {} writers", done.writers) : std::string();
    if (!background)
        return fmt::format("in {:.2f} s{}{}", done.stall,
                           done.bytes > 0 ? fmt::format(", this rank wrote {:.1f} MB", done.bytes / 1e6) : std::string(),
                           writers);
    return fmt::format("in the background: training stalled {:.3f} s, this rank wrote {:.1f} MB in {:.3f} s{}", done.stall,
                       done.bytes / 1e6, done.write, writers);
}

}  // namespace kiln::train
