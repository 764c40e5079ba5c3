#include "cli_options.hpp"

#include "kiln/base/error.hpp"
#include "kiln/base/log.hpp"

#include <fmt/format.h>

#include <cctype>
#include <sstream>

namespace kiln::apps {

bool parseCommandLine(int argc, char** argv, const std::string& usage, const po::options_description& options,
                      const po::positional_options_description& positional, po::variables_map& values) {
    po::options_description all;
    all.add(options);
    all.add_options()("help,h", "show this help");
    try {
        const po::parsed_options parsed = po::command_line_parser(argc, argv).options(all).positional(positional).run();
        // Boost takes the word after an option as its value even when that word
        // is another option ("--out --overwrite" would write into a directory
        // named --overwrite): refuse it, unless written as --out=--overwrite.
        for (const auto& option : parsed.options) {
            if (option.original_tokens.size() < 2) continue;
            for (std::size_t i = 1; i < option.original_tokens.size(); ++i) {
                const std::string& word = option.original_tokens[i];
                if (word.size() > 1 && word[0] == '-' && (std::isalpha(static_cast<unsigned char>(word[1])) || word[1] == '-'))
                    throw InputError(fmt::format("option --{} was given '{}' as its value, which is an option; give --{} "
                                                 "a value (write --{}={} if you really mean that value)\nusage: {}",
                                                 option.string_key, word, option.string_key, option.string_key, word, usage));
            }
        }
        po::store(parsed, values);
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
