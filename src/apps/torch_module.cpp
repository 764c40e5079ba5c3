// Opening kiln_torch (base/module_loader.hpp finds it) and running its commands.
#include "torch_module.hpp"

#include "kiln/base/error.hpp"
#include "kiln/base/module_loader.hpp"
#include "kiln/io/hdf5.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>

namespace kiln::apps {
namespace {

using TorchMain = int (*)(const char* name, int argc, char** argv);

TorchMain loadModule() {
    // RTLD_LOCAL: libtorch's libraries stay out of the global scope; the module
    // binds to the executable's symbols (it exports them) for everything else.
    // RTLD_LAZY: libtorch_cpu has 30,000 function relocations, most for
    // operators kiln never calls; binding them on first call saves every rank
    // about 6 % of a short run's CPU. (A symbol missing would show at its first
    // call rather than at start-up; module and executable are built together.)
    void* handle = base::openKilnModule("kiln's libtorch module", "KILN_TORCH_MODULE", KILN_TORCH_MODULE,
                                        RTLD_LAZY | RTLD_LOCAL);
    auto entry = reinterpret_cast<TorchMain>(dlsym(handle, "kiln_torch_main"));
    if (!entry)
        throw Error(fmt::format("kiln's libtorch module is not a kiln_torch module: {}", dlerror()), ErrorScope::ThisRank);
    return entry;
}

}  // namespace

int runTorchCommand(const char* name, int argc, char** argv) {
    static const TorchMain entry = loadModule();
    const int status = entry(name, argc, argv);
    // The command is done and MPI finalized. Exit handlers would now undo libtorch's start-up (every operator
    // deregistered, its heap freed block by block): 0.13 CPU-s a rank, a fifth of a short 6-rank run's CPU, and a
    // test suite launches hundreds. What kiln still holds is flushed and closed here instead.
    std::fflush(nullptr);
    io::h5::closeLibrary();
    std::_Exit(status);
}

}  // namespace kiln::apps
