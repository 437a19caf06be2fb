// The trace of `simulate --trace` is valid Chrome trace JSON with a host track, one track per
// stream, a memory counter, and op durations equal to the timeline's.
#include <catch2/catch.hpp>

#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "sim/analysis/run.hpp"
#include "sim/report/chrome_trace.hpp"

using namespace stepsim;

TEST_CASE("The Chrome trace parses back with a host track, one track per stream, a memory counter and exact durations",
          "[report][trace]") {
  Experiment e = load_experiment(std::string(STEPSIM_SOURCE_DIR) + "/configs/examples/seed/c1-ddp-buckets.json");
  SimulationResult r = run_experiment(e);
  std::ostringstream out;
  write_chrome_trace(out, r.timeline, "c1");
  auto j = nlohmann::json::parse(out.str());
  REQUIRE(j.contains("traceEvents"));
  std::map<int, std::string> thread_names;
  int counters = 0, reserved_counters = 0, steps = 0;
  std::map<std::string, double> dur_us;
  for (const auto& ev : j["traceEvents"]) {
    if (ev["ph"] == "M" && ev["name"] == "thread_name") thread_names[ev["tid"].get<int>()] = ev["args"]["name"];
    if (ev["ph"] == "C" && ev["name"] == "memory (bytes)") ++counters;
    if (ev["ph"] == "C" && ev["name"] == "memory reserved (bytes)") ++reserved_counters;
    if (ev["ph"] == "X" && ev["name"] == "ProfilerStep#0") {
      ++steps;
      CHECK(ev["dur"].get<double>() == Approx(56000.0));  // 56 ms in microseconds
    }
    if (ev["ph"] == "X" && ev.value("cat", "") == "kernel") dur_us[ev["name"]] = ev["dur"].get<double>();
  }
  CHECK(thread_names[0] == "host thread");
  CHECK(thread_names.size() == 1 + r.timeline.streams.size());  // default + nccl streams
  // One allocated (by category) and one reserved sample per memory change.
  CHECK(counters == static_cast<int>(r.timeline.memory.size()));
  CHECK(reserved_counters == counters);
  CHECK(steps == 1);
  CHECK(dur_us["AR bucket 0"] == Approx(6000.0));   // 6 ms all-reduce of layers 9, 8
  CHECK(dur_us["bwd layer.9"] == Approx(5000.0));
}
