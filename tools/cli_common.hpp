#pragma once
// Helpers shared by the subcommands: option parsing with Boost.Program_options that turns
// its errors into InputError (exit 2), and `--help` text.

#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "tools/commands.hpp"

namespace stepsim::cli {

namespace po = boost::program_options;

// Parses `args` against `visible` (+ positional names); returns false if --help was given
// (after printing `usage` and the options). Throws InputError on a bad flag.
bool parse_args(const Args& args, const std::string& usage, po::options_description& visible,
                const po::positional_options_description& positional, po::variables_map& vm);

}  // namespace stepsim::cli
