// Placeholder until the issue that delivers the fsdp2 strategy lands.
#include "sim/strategies/strategy.hpp"

namespace stepsim {

std::unique_ptr<Strategy> parse_fsdp2(ObjectReader& r, const Experiment&) {
  r.fail("framework", "a framework implemented in this build (fsdp2 is not yet)");
}

}  // namespace stepsim
