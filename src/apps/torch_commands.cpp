// kiln_torch's entry: the commands that use libtorch, run by kiln through
// runTorchCommand (torch_module.hpp).
#include "kiln/model/cpu_allocations.hpp"
#include "subcommands.hpp"

#include <cstring>

namespace {

struct TorchCommand {
    const char* name;
    int (*main)(int argc, char** argv);
};

const TorchCommand kTorchCommands[] = {
    {"run", kiln::apps::runMain},
    {"profile", kiln::apps::profileMain},
    {"plan", kiln::apps::planMain},
    {"simulate", kiln::apps::simulateMain},
    {"checkpoint", kiln::apps::checkpointMain},
    {"export", kiln::apps::exportMain},
    {"import", kiln::apps::importMain},
};

}  // namespace

// Errors propagate to kiln's main, which reports them as for any command.
extern "C" int kiln_torch_main(const char* name, int argc, char** argv) {
    // The memory report counts libtorch's CPU allocations from here on.
    kiln::model::countCpuAllocations();
    for (const auto& command : kTorchCommands)
        if (!std::strcmp(command.name, name)) return command.main(argc, argv);
    return 2;
}
