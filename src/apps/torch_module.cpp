// Opening kiln_torch (base/module_loader.hpp finds it) and running its commands.
#include "torch_module.hpp"

#include "kiln/base/error.hpp"
#include "kiln/base/module_loader.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

namespace kiln::apps {
namespace {

using TorchMain = int (*)(const char* name, int argc, char** argv);

TorchMain loadModule() {
    // RTLD_LOCAL: libtorch's libraries stay out of the global scope; the module
    // binds to the executable's symbols (it exports them) for everything else.
    void* handle = base::openKilnModule("kiln's libtorch module", "KILN_TORCH_MODULE", KILN_TORCH_MODULE,
                                        RTLD_NOW | RTLD_LOCAL);
    auto entry = reinterpret_cast<TorchMain>(dlsym(handle, "kiln_torch_main"));
    if (!entry)
        throw Error(fmt::format("kiln's libtorch module is not a kiln_torch module: {}", dlerror()), ErrorScope::ThisRank);
    return entry;
}

}  // namespace

int runTorchCommand(const char* name, int argc, char** argv) {
    static const TorchMain entry = loadModule();
    return entry(name, argc, argv);
}

}  // namespace kiln::apps
