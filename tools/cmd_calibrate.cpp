// Placeholder until the issue that delivers `stepsim calibrate` lands; it says so and fails.
#include <iostream>

#include "tools/commands.hpp"

namespace stepsim::cli {

int calibrate(const Args&) {
  std::cerr << "error: 'stepsim calibrate' is not implemented in this build\n";
  return 1;
}

}  // namespace stepsim::cli
