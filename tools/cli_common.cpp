#include "tools/cli_common.hpp"

#include <iostream>

#include "sim/core/error.hpp"

namespace stepsim::cli {

bool parse_args(const Args& args, const std::string& usage, po::options_description& visible,
                const po::positional_options_description& positional, po::variables_map& vm) {
  visible.add_options()("help,h", "show this help");
  try {
    po::store(po::command_line_parser(args).options(visible).positional(positional).run(), vm);
    if (vm.count("help")) {
      std::cout << usage << "\n\n" << visible << "\n";
      return false;
    }
    po::notify(vm);
  } catch (const po::error& e) {
    throw InputError(std::string(e.what()) + " (see --help)");
  }
  return true;
}

}  // namespace stepsim::cli
