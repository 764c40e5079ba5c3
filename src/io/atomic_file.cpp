#include "kiln/io/atomic_file.hpp"

#include "kiln/base/error.hpp"
#include "kiln/base/unique_fd.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fmt/format.h>

namespace kiln::io {
namespace {

[[noreturn]] void fail(const std::string& what, const std::filesystem::path& path) {
    throw Error(fmt::format("{} '{}': {}", what, path.string(), std::strerror(errno)), ErrorScope::ThisRank);
}

void syncPath(const std::filesystem::path& path, int flags) {
    const UniqueFd fd(::open(path.c_str(), flags));
    if (fd.get() < 0) fail("cannot open for sync", path);
    if (::fsync(fd.get()) != 0) fail("cannot sync", path);  // closed after the message has read errno
}

}  // namespace

std::filesystem::path temporarySibling(const std::filesystem::path& path) {
    return path.parent_path() / fmt::format(".{}.tmp.{}", path.filename().string(), ::getpid());
}

void commitTemporary(const std::filesystem::path& temporary, const std::filesystem::path& path) {
    syncPath(temporary, O_RDONLY);
    if (::rename(temporary.c_str(), path.c_str()) != 0) fail("cannot rename into place", path);
    const auto dir = path.parent_path().empty() ? std::filesystem::path(".") : path.parent_path();
    syncPath(dir, O_RDONLY | O_DIRECTORY);
}

void writeFileAtomically(const std::filesystem::path& path, const std::string& content) {
    if (!path.parent_path().empty()) std::filesystem::create_directories(path.parent_path());
    const auto temporary = temporarySibling(path);
    {
        const UniqueFd fd(::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644));
        if (fd.get() < 0) fail("cannot create", temporary);
        for (std::size_t written = 0; written < content.size();) {
            const ssize_t n = ::write(fd.get(), content.data() + written, content.size() - written);
            if (n < 0) fail("cannot write", temporary);
            written += static_cast<std::size_t>(n);
        }
    }  // closed before the rename
    commitTemporary(temporary, path);
}

}  // namespace kiln::io
