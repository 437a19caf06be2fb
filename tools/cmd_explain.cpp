// Placeholder until the issue that delivers `stepsim explain` lands; it says so and fails.
#include <iostream>

#include "tools/commands.hpp"

namespace stepsim::cli {

int explain(const Args&) {
  std::cerr << "error: 'stepsim explain' is not implemented in this build\n";
  return 1;
}

}  // namespace stepsim::cli
