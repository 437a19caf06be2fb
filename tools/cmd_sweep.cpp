// Placeholder until the issue that delivers `stepsim sweep` lands; it says so and fails.
#include <iostream>

#include "tools/commands.hpp"

namespace stepsim::cli {

int sweep(const Args&) {
  std::cerr << "error: 'stepsim sweep' is not implemented in this build\n";
  return 1;
}

}  // namespace stepsim::cli
