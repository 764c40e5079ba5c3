// Boost.Program_options helpers shared by the subcommands.
#pragma once

#include <boost/program_options.hpp>

#include <string>
#include <vector>

namespace kiln::apps {

namespace po = boost::program_options;

// Parses argv (after the subcommand name) against `options` and `positional`;
// a bad command line becomes an InputError naming the subcommand. Returns
// false when --help was asked for (and printed).
bool parseCommandLine(int argc, char** argv, const std::string& usage, const po::options_description& options,
                      const po::positional_options_description& positional, po::variables_map& values);

}  // namespace kiln::apps
