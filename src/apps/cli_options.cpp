#include "cli_options.hpp"

#include "kiln/base/error.hpp"
#include "kiln/base/log.hpp"

#include <fmt/format.h>

#include <sstream>

namespace kiln::apps {

bool parseCommandLine(int argc, char** argv, const std::string& usage, const po::options_description& options,
                      const po::positional_options_description& positional, po::variables_map& values) {
    po::options_description all;
    all.add(options);
    all.add_options()("help,h", "show this help");
    try {
        po::store(po::command_line_parser(argc, argv).options(all).positional(positional).run(), values);
        if (values.count("help")) {
            std::ostringstream text;
            text << all;
            log::info("usage: {}\n\n{}", usage, text.str());
            return false;
        }
        po::notify(values);
    } catch (const po::error& e) {
        throw InputError(fmt::format("{}\nusage: {}", e.what(), usage));
    }
    return true;
}

}  // namespace kiln::apps
