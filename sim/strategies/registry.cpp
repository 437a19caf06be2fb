#include "sim/strategies/strategy.hpp"
#include "sim/strategies/strategy_keys.hpp"

namespace stepsim {

std::unique_ptr<Strategy> parse_strategy(ObjectReader& r, const Experiment& e) {
  std::string fw = r.choice("framework", {"ddp", "fsdp1", "fsdp2", "zero"});
  // From here the object's keys are the framework's (strategy_keys.cpp): an unknown key's
  // error lists all of them.
  r.declare(*strategy_keys::for_framework(fw));
  std::unique_ptr<Strategy> s;
  if (fw == "ddp") s = parse_ddp(r, e);
  else if (fw == "fsdp1") s = parse_fsdp1(r, e);
  else if (fw == "fsdp2") s = parse_fsdp2(r, e);
  else s = parse_zero(r, e);
  r.finish();
  return s;
}

}  // namespace stepsim
