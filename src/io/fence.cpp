#include "kiln/io/fence.hpp"

#include "kiln/base/log.hpp"
#include "kiln/io/atomic_file.hpp"

#include <csignal>
#include <fstream>

namespace kiln::io {

void Fence::arm(std::filesystem::path file, std::uint64_t epoch) {
    file_ = std::move(file);
    epoch_ = epoch;
}

std::uint64_t publishedEpoch(const std::filesystem::path& file) {
    std::uint64_t value = 0;
    std::ifstream in(file);
    in >> value;
    return in ? value : 0;
}

std::uint64_t Fence::published() const { return file_.empty() ? 0 : publishedEpoch(file_); }

void Fence::publish() const {
    if (!file_.empty()) writeFileAtomically(file_, std::to_string(epoch_) + "\n");
}

void Fence::check(const char* what) const {
    if (file_.empty()) return;
    const std::uint64_t job = published();
    if (job <= epoch_) return;
    log::warn("the job has moved on without this process (its epoch {}, the job's {} in {}): it was declared "
              "failed; it ends without committing {}",
              epoch_, job, file_.string(), what);
    std::raise(SIGKILL);
}

Fence& fence() {
    static Fence instance;
    return instance;
}

}  // namespace kiln::io
