// The fault injection points of a checkpoint (its publish on the writing rank, its part file's write in a
// writer's thread, which for a background checkpoint runs steps later). The hooks hold the injector: a writer
// thread still running while the trainer is torn down (an exception during a background write at shutdown)
// must not call an injector already destroyed. Private to train/.
#pragma once

#include "kiln/fault/fault_injector.hpp"
#include "kiln/train/checkpoint_manager.hpp"

#include <cstdint>
#include <memory>

namespace kiln::train {

// For a checkpoint of `step`: the phases of step `step - 1`, the one it follows (as for the checkpoint phase).
CheckpointManager::Hooks checkpointFaultHooks(std::shared_ptr<fault::FaultInjector> injector, std::uint64_t step);

}  // namespace kiln::train
