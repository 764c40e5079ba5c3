#include "kiln/base/module_loader.hpp"

#include "kiln/base/error.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace kiln::base {

void* openKilnModule(const char* what, const char* envVar, const char* builtPath, int flags) {
    const char* override = std::getenv(envVar);
    std::string path = override ? override : builtPath;
    std::error_code ignored;
    const auto installed = std::filesystem::read_symlink("/proc/self/exe", ignored).parent_path().parent_path() / "lib" /
                           "kiln" / std::filesystem::path(builtPath).filename();
    if (!override && std::filesystem::exists(installed, ignored)) path = installed.string();
    void* handle = dlopen(path.c_str(), flags);
    if (!handle)
        throw Error(fmt::format("cannot load {} {}: {} (set {} to its path)", what, path, dlerror(), envVar),
                    ErrorScope::ThisRank);
    return handle;
}

}  // namespace kiln::base
