// Seed cases C1 and C2 (reference/seed-cases.md) as simulations of the shipped examples.
#include <catch2/catch.hpp>

#include "sim/analysis/run.hpp"
#include "sim/strategies/load_experiment.hpp"
#include "test_support.hpp"

using namespace stepsim;

namespace {
SimulationResult run_file(const std::string& name) {
  return run_experiment(load_experiment(std::string(STEPSIM_SOURCE_DIR) + "/configs/examples/seed/" + name));
}
}  // namespace

TEST_CASE("C1: DDP buckets of two layers hide all but the last all-reduce: step 56 ms", "[golden][ddp]") {
  SimulationResult r = run_file("c1-ddp-buckets.json");
  const Metrics& m = r.metrics;
  // Backward 10 x 5 ms = 50 ms; five buckets of 6 ms all-reduce, each hidden behind the next
  // bucket's 10 ms of backward except the last (layers 1, 0): 50 + 6 = 56 ms.
  CHECK(m.overlap.step_time == Time::from_ms(56));
  CHECK(m.overlap.comm_time == Time::from_ms(30));
  CHECK(m.overlap.exposed_comm == Time::from_ms(6));
  // (sequential 80 - overlapped 56) / comm 30 = 80 %
  CHECK(m.overlap.overlap_pct == Approx(80.0));

  // The exposed part is exactly the last bucket's all-reduce, the bucket holding layer 0.
  auto exposed = exposed_per_op(r.timeline);
  int collectives = 0;
  for (std::size_t i = 0; i < r.timeline.ops.size(); ++i) {
    const auto& op = r.timeline.ops[i];
    if (op.kind != TimelineOp::Kind::Collective) continue;
    ++collectives;
    if (op.name == "AR bucket 4") {
      CHECK(exposed[i] == Time::from_ms(6));
      CHECK(op.start == Time::from_ms(50));
    } else {
      CHECK(exposed[i] == Time::zero());
    }
  }
  CHECK(collectives == 5);
}

TEST_CASE("C2: bucket size against per-message latency: step = n * (alpha + B / beta)", "[golden][ddp]") {
  // 1 GB of gradients; alpha 100 us, beta 12.5 GB/s; n = 1 GB / B buckets back to back.
  struct Row {
    const char* file;
    int buckets;
    double step_ms;
  };
  const Row rows[] = {{"c2-bucket-1mb.json", 1000, 180},   // 1000 * (100 us + 80 us)
                      {"c2-bucket-10mb.json", 100, 90},    // 100 * (100 us + 800 us)
                      {"c2-bucket-25mb.json", 40, 84},     // 40 * (100 us + 2 ms)
                      {"c2-bucket-100mb.json", 10, 81}};   // 10 * (100 us + 8 ms)
  for (const auto& row : rows) {
    SECTION(row.file) {
      SimulationResult r = run_file(row.file);
      int n = 0;
      for (const auto& op : r.timeline.ops) n += op.kind == TimelineOp::Kind::Collective;
      CHECK(n == row.buckets);
      CHECK(r.metrics.overlap.step_time == Time::from_ms(row.step_ms));
    }
  }
}
