#pragma once
// The `--json` result (schema "stepsim.result/1"), shared by simulate and live so that
// compare can read either:
//   {"schema", "tool", "mode": "simulate"|"live", "device", "experiment": {...resolved config},
//    "summary": {...}, "metrics": {...DESIGN.md 5...}, "ops": [{per op}], "strategy": {...}}

#include <iosfwd>

#include <nlohmann/json.hpp>

#include "sim/analysis/run.hpp"
#include "sim/config/experiment.hpp"

namespace stepsim {

inline constexpr const char* kResultSchema = "stepsim.result/1";

nlohmann::json result_to_json(const Experiment& e, const SimulationResult& r, const std::string& mode = "simulate");
// result_to_json(e, r, mode) with `extra`'s members added at its root (an object, or null for
// none), written to `out` byte for byte as its dump(indent) is, without the trailing newline;
// but the ops array (most of the document: 534 KB of 621 KB for an 8B example) is written op
// by op from the timeline instead of built as a DOM first. `simulate --json` and `--json-out`.
void write_result_json(std::ostream& out, const Experiment& e, const SimulationResult& r,
                       const nlohmann::json& extra = nullptr, int indent = 1, const std::string& mode = "simulate");
// The ops array alone (also used by live).
nlohmann::json ops_to_json(const Timeline& t);

}  // namespace stepsim
