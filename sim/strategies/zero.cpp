// Placeholder until the issue that delivers the zero strategy lands.
#include "sim/strategies/strategy.hpp"

namespace stepsim {

std::unique_ptr<Strategy> parse_zero(ObjectReader& r, const Experiment&) {
  r.fail("framework", "a framework implemented in this build (zero is not yet)");
}

}  // namespace stepsim
