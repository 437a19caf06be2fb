// Placeholder until the issue that delivers `stepsim analyze` lands; it says so and fails.
#include <iostream>

#include "tools/commands.hpp"

namespace stepsim::cli {

int analyze(const Args&) {
  std::cerr << "error: 'stepsim analyze' is not implemented in this build\n";
  return 1;
}

}  // namespace stepsim::cli
