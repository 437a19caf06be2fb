// Placeholder until the issue that delivers `stepsim live` lands; it says so and fails.
#include <iostream>

#include "tools/commands.hpp"

namespace stepsim::cli {

int live(const Args&) {
  std::cerr << "error: 'stepsim live' is not implemented in this build\n";
  return 1;
}

}  // namespace stepsim::cli
