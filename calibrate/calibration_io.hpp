#pragma once
// The raw measurements `stepsim calibrate` writes, stored inside the profile it outputs under
// "provenance": {"calibration": {...}} so a calibrated profile is both usable directly and
// re-fittable with `stepsim fit --calibration`. Format (times in microseconds, S nccl-tests):
//   {"format": "stepsim-calibration-1",
//    "device": {"name": ..., "compute_capability": "9.0", "sm_count": 132, ...},
//    "collectives": [{"kind": "all_reduce", "ranks": 8, "nodes": 1, "label": "world",
//                     "points": [[bytes, time_us, spread_pct], ...]}],
//    "gemm": [{"m":..,"n":..,"k":..,"batch":..,"dtype":"bf16","tflops":..,"spread_pct":..}],
//    "contention": {"gemm_alone_us":.., "gemm_concurrent_us":.., "comm_alone_us":.., "comm_concurrent_us":..}}

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "calibrate/measurements.hpp"

namespace stepsim::calib {

struct CalibrationData {
  std::vector<CollectiveSeries> collectives;
  std::vector<GemmSample> gemm;
  std::optional<ContentionSample> contention;
  nlohmann::json device = nlohmann::json::object();
  // How the GEMMs were timed beyond the nccl-tests protocol (gemm_sustain_ms: GPU time each
  // shape ran back to back before its warm-up); empty when nothing was set.
  nlohmann::json timing = nlohmann::json::object();
};

nlohmann::json calibration_to_json(const CalibrationData& data);
// `doc` is a whole profile (with provenance.calibration) or the calibration object itself.
// Errors name `source` and the JSON path.
CalibrationData calibration_from_json(const nlohmann::json& doc, const std::string& source);
CalibrationData import_calibration(const std::filesystem::path& file);

}  // namespace stepsim::calib
