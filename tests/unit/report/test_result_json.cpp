// `simulate --json` streams its ops array (write_result_json) instead of dumping the DOM that
// result_to_json builds; the two must be the same bytes.
#include <catch2/catch.hpp>

#include <filesystem>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "sim/analysis/idle.hpp"
#include "sim/analysis/run.hpp"
#include "sim/report/result_json.hpp"
#include "sim/strategies/load_experiment.hpp"

using namespace stepsim;

namespace {

std::string streamed(const Experiment& e, const SimulationResult& r, const nlohmann::json& extra, int indent) {
  std::ostringstream out;
  write_result_json(out, e, r, extra, indent);
  return out.str();
}

// The first byte where a and b differ, with some context, for a readable failure.
std::string first_difference(const std::string& a, const std::string& b) {
  std::size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  if (i == a.size() && i == b.size()) return "identical";
  const std::size_t from = i < 40 ? 0 : i - 40;
  return "byte " + std::to_string(i) + ": DOM ..." + a.substr(from, 80) + "... streamed ..." + b.substr(from, 80) + "...";
}

}  // namespace

TEST_CASE("simulate --json's streamed result is byte for byte the DOM's dump, for every example", "[report]") {
  // Expectations: write_result_json(e, r, extra, 1) == (result_to_json(e, r) + extra).dump(1),
  // the document `simulate --json` printed before the ops were streamed.
  std::size_t examples = 0;
  for (const auto& f : std::filesystem::directory_iterator(std::string(STEPSIM_SOURCE_DIR) + "/configs/examples")) {
    if (f.path().extension() != ".json") continue;
    ++examples;
    INFO(f.path().filename().string());
    const Experiment e = load_experiment(f.path().string());
    const SimulationResult r = run_experiment(e);
    REQUIRE(r.timeline.ops.size() > 100);  // the ops array is there to stream
    const std::string dom = result_to_json(e, r).dump(1);
    const std::string out = streamed(e, r, nullptr, 1);
    INFO(first_difference(dom, out));
    CHECK(out == dom);
  }
  CHECK(examples >= 8);  // the 8 of configs/examples at this writing
}

TEST_CASE("The streamed result places extra members (idle, samples) and the ops in key order, at any indent", "[report]") {
  const Experiment e = load_experiment(std::string(STEPSIM_SOURCE_DIR) + "/configs/examples/seed/c1-ddp-buckets.json");
  const SimulationResult r = run_experiment(e);
  // "idle" sorts before "ops", "step_time_samples" and "zzz" after it; a name with a quote and a
  // non-ASCII character goes through nlohmann's escaping, as a value and as a key.
  nlohmann::json extra = {{"idle", idle_to_json(attribute_idle(r.timeline))},
                          {"step_time_samples", {{"samples", 3}, {"p50_ns", 12}}},
                          {"zzz", "a \"quoted\" \xc3\xa9 name"},
                          {"\xc3\xa9t\xc3\xa9 \"key\"", 1}};
  nlohmann::json dom = result_to_json(e, r);
  for (const auto& [k, v] : extra.items()) dom[k] = v;
  for (int indent : {0, 1, 2, 4}) {
    INFO("indent " << indent);
    const std::string out = streamed(e, r, extra, indent);
    INFO(first_difference(dom.dump(indent), out));
    CHECK(out == dom.dump(indent));
  }
}
