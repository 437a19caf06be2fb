#pragma once
// Checks shared by the [gpu] and the emulated live tests: a `stepsim live` result is a
// stepsim.result/1 document in mode "live" that ran the predicted Program (same ops, same order).
#include <catch2/catch.hpp>

#include <cstdint>

#include <nlohmann/json.hpp>

namespace stepsim::test {

inline void check_live_result(const nlohmann::json& measured, const nlohmann::json& predicted, int steps) {
  CHECK(measured["schema"] == "stepsim.result/1");
  CHECK(measured["mode"] == "live");
  CHECK(measured["live"]["mpi_world_size"] == 1);
  CHECK(measured["live"]["steps"] == steps);
  REQUIRE(measured["ops"].size() == predicted["ops"].size());
  for (std::size_t i = 0; i < predicted["ops"].size(); ++i) CHECK(measured["ops"][i]["name"] == predicted["ops"][i]["name"]);
  for (const auto& op : measured["ops"]) CHECK(op["end_ns"].get<std::int64_t>() >= op["start_ns"].get<std::int64_t>());
  CHECK(measured["metrics"]["step_time_ns"].get<std::int64_t>() > 0);
  CHECK(measured["metrics"]["peak_memory_bytes"].get<std::int64_t>() > 0);
  // The measured pool peak holds at least what the Program had live at its peak.
  CHECK(measured["metrics"]["peak_memory_bytes"].get<std::int64_t>() >=
        measured["live"]["memory"]["accounted_peak_bytes"].get<std::int64_t>());
}

}  // namespace stepsim::test
