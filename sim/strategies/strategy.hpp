#pragma once
// A strategy is a pure function (Workload, Cluster, config) -> Program (DESIGN.md section 1):
// it writes the per-step host program the way the framework's Python issues it. One file
// per framework; each parses and validates its own config object.

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "sim/config/experiment.hpp"
#include "sim/config/json_reader.hpp"
#include "sim/program/program.hpp"

namespace stepsim {

class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual std::string framework() const = 0;   // "ddp", "fsdp1", ...
  // Builds one steady-state training step (all micro-batches and the optimizer step). Of the
  // hardware profile it reads the host section only (e.cluster.profile->host): the engine prices
  // everything else, and a sweep shares one program among points that differ in the rest of the
  // profile (ProgramCache, sim/explore/sweep.hpp), so a build that reads more must say so there.
  virtual Program build(const Experiment& e) const = 0;
  // At least as many instructions as build(e) writes (instruction_estimate, common.hpp): what
  // build reserves, so that the program's array is never regrown (tests/unit/strategies/
  // test_instruction_estimate.cpp holds it above every shipped example's program).
  virtual std::size_t instruction_estimate(const Experiment& e) const = 0;
  // The effective knob values, defaults included (reported and used by sweeps/tune).
  virtual nlohmann::json effective_config() const = 0;
};

// Reads `strategy` (the reader is positioned at /strategy; "framework" and "world_size" are
// already consumed) and returns the validated strategy. `e` carries workload, cluster and
// training, already parsed.
std::unique_ptr<Strategy> parse_ddp(ObjectReader& r, const Experiment& e);
std::unique_ptr<Strategy> parse_fsdp1(ObjectReader& r, const Experiment& e);
std::unique_ptr<Strategy> parse_fsdp2(ObjectReader& r, const Experiment& e);
std::unique_ptr<Strategy> parse_zero(ObjectReader& r, const Experiment& e);

// The registry (registry.cpp): reads "framework", declares that framework's key table and
// calls its parser. load_experiment (load_experiment.hpp) hands it the experiment's strategy.
std::unique_ptr<Strategy> parse_strategy(ObjectReader& r, const Experiment& e);

}  // namespace stepsim
