// Placeholder until the issue that delivers `stepsim tune` lands; it says so and fails.
#include <iostream>

#include "tools/commands.hpp"

namespace stepsim::cli {

int tune(const Args&) {
  std::cerr << "error: 'stepsim tune' is not implemented in this build\n";
  return 1;
}

}  // namespace stepsim::cli
