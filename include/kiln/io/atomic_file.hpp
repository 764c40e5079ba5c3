// Replace a file so that a crash at any instant leaves either the old or the
// new content, never a mix: write a sibling temporary, flush it to disk,
// rename it over the target, flush the directory.
#pragma once

#include <filesystem>
#include <string>

namespace kiln::io {

void writeFileAtomically(const std::filesystem::path& path, const std::string& content);

// The temporary name used for `path` while it is written (same directory).
std::filesystem::path temporarySibling(const std::filesystem::path& path);

// Makes a completed temporary file durable and moves it over `path`.
void commitTemporary(const std::filesystem::path& temporary, const std::filesystem::path& path);

}  // namespace kiln::io
