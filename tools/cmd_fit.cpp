// Placeholder until the issue that delivers `stepsim fit` lands; it says so and fails.
#include <iostream>

#include "tools/commands.hpp"

namespace stepsim::cli {

int fit(const Args&) {
  std::cerr << "error: 'stepsim fit' is not implemented in this build\n";
  return 1;
}

}  // namespace stepsim::cli
