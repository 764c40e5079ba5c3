#include "kiln/fault/admit_request.hpp"

#include <fmt/format.h>

#include <fstream>
#include <sstream>
#include <system_error>

namespace kiln::fault {

AdmitRequest takeAdmitRequest(const std::filesystem::path& path) {
    AdmitRequest request;
    std::error_code missing;
    if (!std::filesystem::exists(path, missing)) return request;
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    std::filesystem::remove(path, missing);  // taken once, whatever it says
    std::string count, hosts, extra;
    text >> count >> hosts >> extra;
    if (count.empty()) {
        request.nodes = 1;
        return request;
    }
    std::size_t used = 0;
    long nodes = 0;
    try {
        nodes = std::stol(count, &used);
    } catch (const std::exception&) {
        used = 0;
    }
    if (used != count.size() || nodes < 1 || nodes > 4096 || !extra.empty()) {
        request.problem = fmt::format("{}: expected the number of nodes to admit (1 to 4096), optionally followed by "
                                      "a comma-separated host list; found '{}'",
                                      path.string(), text.str().substr(0, 80));
        return request;
    }
    request.nodes = static_cast<int>(nodes);
    request.hosts = hosts;
    return request;
}

}  // namespace kiln::fault
