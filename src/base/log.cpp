#include "kiln/base/log.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace kiln::log {
namespace {

// Before MPI starts (a bad command line, a bad deck) the launcher's
// environment says which process this is, so that an error every process
// meets is printed once.
int launcherRank() {
    for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"})
        if (const char* value = std::getenv(name)) return std::atoi(value);
    return 0;
}

int rank_ = launcherRank();
std::string host_ = "localhost";
std::atomic<int> speaker_{-1};  // -1: rank 0 speaks (read by the alive beacon's thread too)
}  // namespace

void speakForJob(bool speaks) { speaker_ = speaks ? 1 : 0; }
bool speaksForJob() { return speaker_ < 0 ? rank_ == 0 : speaker_ == 1; }

void setIdentity(int rank, std::string host) {
    rank_ = rank;
    host_ = std::move(host);
}
int rank() { return rank_; }
bool verbose() {
    static const bool on = [] {
        const char* value = std::getenv("KILN_VERBOSE");
        return value != nullptr && *value != '\0' && std::string(value) != "0";
    }();
    return on;
}
const std::string& host() { return host_; }

void writeInfo(const std::string& line) {
    std::fputs(line.c_str(), stdout);
    std::fputc('\n', stdout);
    std::fflush(stdout);
}

void writeWarn(const std::string& line) {
    std::fprintf(stderr, "kiln: warning [rank %d on %s]: %s\n", rank_, host_.c_str(), line.c_str());
    std::fflush(stderr);
}

}  // namespace kiln::log
