#include "kiln/base/resident_memory.hpp"

#include <fstream>
#include <string>

namespace kiln::base {
namespace {

std::uint64_t statusField(const std::string& name) {
    std::ifstream status("/proc/self/status");
    for (std::string line; std::getline(status, line);)
        if (line.compare(0, name.size(), name) == 0 && line.size() > name.size() && line[name.size()] == ':')
            return std::stoull(line.substr(name.size() + 1)) * 1024;  // "VmRSS:    1234 kB"
    return 0;
}

}  // namespace

std::uint64_t residentBytes() { return statusField("VmRSS"); }
std::uint64_t peakResidentBytes() { return statusField("VmHWM"); }

}  // namespace kiln::base
