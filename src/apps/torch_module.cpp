// Finding and opening kiln_torch: next to an installed kiln (<prefix>/lib/kiln),
// else where the build wrote it, or where KILN_TORCH_MODULE says.
#include "torch_module.hpp"

#include "kiln/base/error.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace kiln::apps {
namespace {

using TorchMain = int (*)(const char* name, int argc, char** argv);

std::string modulePath() {
    if (const char* override = std::getenv("KILN_TORCH_MODULE")) return override;
    std::error_code ignored;
    const auto installed = std::filesystem::read_symlink("/proc/self/exe", ignored).parent_path().parent_path() / "lib" /
                           "kiln" / std::filesystem::path(KILN_TORCH_MODULE).filename();
    return std::filesystem::exists(installed, ignored) ? installed.string() : std::string(KILN_TORCH_MODULE);
}

TorchMain loadModule() {
    const std::string path = modulePath();
    // RTLD_LOCAL: libtorch's libraries stay out of the global scope; the module
    // binds to the executable's symbols (it exports them) for everything else.
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle)
        throw Error(fmt::format("cannot load kiln's libtorch module {}: {} (set KILN_TORCH_MODULE to its path)", path,
                                dlerror()),
                    ErrorScope::ThisRank);
    auto entry = reinterpret_cast<TorchMain>(dlsym(handle, "kiln_torch_main"));
    if (!entry) throw Error(fmt::format("{} has no kiln_torch_main: not a kiln_torch module", path), ErrorScope::ThisRank);
    return entry;
}

}  // namespace

int runTorchCommand(const char* name, int argc, char** argv) {
    static const TorchMain entry = loadModule();
    return entry(name, argc, argv);
}

}  // namespace kiln::apps
