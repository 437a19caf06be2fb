// Placeholder until the engine lands.
#include <iostream>

#include "tools/commands.hpp"

namespace stepsim::cli {

int simulate(const Args&) {
  std::cerr << "error: 'stepsim simulate' is not implemented in this build\n";
  return 1;
}

}  // namespace stepsim::cli
