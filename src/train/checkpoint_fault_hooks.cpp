#include "checkpoint_fault_hooks.hpp"

#include "kiln/io/fence.hpp"

namespace kiln::train {

CheckpointManager::Hooks checkpointFaultHooks(std::shared_ptr<fault::FaultInjector> injector, std::uint64_t step) {
    const std::uint64_t followed = step > 0 ? step - 1 : 0;
    return {[injector, followed] {
                injector->at(followed, fault::Phase::Publish);
                io::fence().check("a checkpoint");
            },
            [injector, followed] { injector->at(followed, fault::Phase::Write); }};
}

}  // namespace kiln::train
