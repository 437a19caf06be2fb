#pragma once
// The `--json` result (schema "stepsim.result/1"), shared by simulate and live so that
// compare can read either:
//   {"schema", "tool", "mode": "simulate"|"live", "device", "experiment": {...resolved config},
//    "summary": {...}, "metrics": {...DESIGN.md 5...}, "ops": [{per op}], "strategy": {...}}

#include <nlohmann/json.hpp>

#include "sim/analysis/run.hpp"
#include "sim/config/experiment.hpp"

namespace stepsim {

inline constexpr const char* kResultSchema = "stepsim.result/1";

nlohmann::json result_to_json(const Experiment& e, const SimulationResult& r, const std::string& mode = "simulate");
// The ops array alone (also used by live).
nlohmann::json ops_to_json(const Timeline& t);

}  // namespace stepsim
