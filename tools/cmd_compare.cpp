// Placeholder until the issue that delivers `stepsim compare` lands; it says so and fails.
#include <iostream>

#include "tools/commands.hpp"

namespace stepsim::cli {

int compare(const Args&) {
  std::cerr << "error: 'stepsim compare' is not implemented in this build\n";
  return 1;
}

}  // namespace stepsim::cli
