// Seed cases C3 and C4 (docs/reference/seed-cases.md) through the shipped example files,
// both as a library call and through the CLI.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/analysis/run.hpp"
#include "sim/strategies/load_experiment.hpp"
#include "test_support.hpp"

using namespace stepsim;

namespace {

std::string seed(const std::string& file) { return std::string(STEPSIM_SOURCE_DIR) + "/configs/examples/seed/" + file; }

SimulationResult run_seed(const std::string& file) { return run_experiment(load_experiment(seed(file))); }

// `stepsim simulate FILE --json`, parsed.
nlohmann::json cli_json(const std::string& file) {
  const test::TempDir dir;
  auto out = dir / "prediction.json";
  std::string cmd = std::string(STEPSIM_BINARY) + " simulate " + seed(file) + " --json > " + out.string();
  REQUIRE(std::system(cmd.c_str()) == 0);
  std::ifstream in(out);
  return nlohmann::json::parse(in);
}

// Names of the backward-phase collectives, in the order they ran on the communicator.
std::vector<std::string> backward_collective_order(const Timeline& t) {
  std::vector<const TimelineOp*> ops;
  for (const auto& op : t.ops)
    if (op.kind == TimelineOp::Kind::Collective && op.phase == Phase::Backward) ops.push_back(&op);
  std::stable_sort(ops.begin(), ops.end(), [](const TimelineOp* a, const TimelineOp* b) { return a->start < b->start; });
  std::vector<std::string> names;
  for (const auto* op : ops) names.push_back(op->name.str());
  return names;
}

}  // namespace

TEST_CASE("C3: with 8 ms layers the implicit forward prefetch hides every all-gather but the first (194 ms)",
          "[fsdp1][golden][seed]") {
  // 24 units, AG 2 ms (2e6 B at 1 GB/s), compute 8 ms: forward = 2 + 24 * 8 = 194 ms. The rate
  // limiter (on by default) lets AG(k) start after compute(k-2), still well before compute(k).
  SimulationResult r = run_seed("c3-fwd-8ms.json");
  CHECK(r.metrics.forward.ns == 194'000'000);
  // Only the first all-gather is exposed in forward: 2 ms.
  Time exposed{};
  std::vector<Time> per_op = exposed_per_op(r.timeline);
  for (std::size_t i = 0; i < r.timeline.ops.size(); ++i)
    if (r.timeline.ops[i].phase == Phase::Forward) exposed += per_op[i];
  CHECK(exposed.ns == 2'000'000);
}

TEST_CASE("C3: with 1 ms layers the forward is communication-bound (49 ms)", "[fsdp1][golden][seed]") {
  // 24 back-to-back 2 ms all-gathers, then the last layer's 1 ms: 24 * 2 + 1 = 49 ms.
  CHECK(run_seed("c3-fwd-1ms.json").metrics.forward.ns == 49'000'000);
}

TEST_CASE("C4: BACKWARD_PRE overlaps each reduce-scatter with the next layer's backward (58 ms)", "[fsdp1][golden][seed]") {
  // Forward 4 x 3 ms AGs = 12 ms; backward 3 + 4 * 10 + 3 = 46 ms; step 58 ms.
  SimulationResult r = run_seed("c4-bwd-pre.json");
  CHECK(r.metrics.overlap.step_time.ns == 58'000'000);
  CHECK(r.metrics.forward.ns == 12'000'000);
  std::vector<std::string> expected = {"AG layer.3 bwd", "AG layer.2 bwd", "RS layer.3", "AG layer.1 bwd",
                                       "RS layer.2",     "AG layer.0 bwd", "RS layer.1", "RS layer.0"};
  CHECK(backward_collective_order(r.timeline) == expected);
}

TEST_CASE("C4: without backward prefetch nothing overlaps (76 ms)", "[fsdp1][golden][seed]") {
  // 12 ms forward + 4 * (AG 3 + backward 10 + RS 3) = 76 ms; AG(i-1) queues behind RS(i).
  SimulationResult r = run_seed("c4-bwd-none.json");
  CHECK(r.metrics.overlap.step_time.ns == 76'000'000);
  std::vector<std::string> expected = {"AG layer.3 bwd", "RS layer.3", "AG layer.2 bwd", "RS layer.2",
                                       "AG layer.1 bwd", "RS layer.1", "AG layer.0 bwd", "RS layer.0"};
  CHECK(backward_collective_order(r.timeline) == expected);
}

TEST_CASE("stepsim simulate --json reports the C3 and C4 numbers for the shipped examples", "[fsdp1][golden][seed][cli]") {
  CHECK(cli_json("c4-bwd-pre.json")["metrics"]["step_time_ns"] == 58'000'000);
  CHECK(cli_json("c4-bwd-none.json")["metrics"]["step_time_ns"] == 76'000'000);
  CHECK(cli_json("c3-fwd-8ms.json")["metrics"]["phases"]["forward_ns"] == 194'000'000);
  CHECK(cli_json("c3-fwd-1ms.json")["metrics"]["phases"]["forward_ns"] == 49'000'000);
}
