// TimelineDetail::Metrics runs the same simulation as Full and records less: the metrics, the ops'
// times, the memory curve and the slowest-rank waits are the same; the host's intervals and the
// start causes are not recorded.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "sim/analysis/metrics.hpp"
#include "sim/analysis/run.hpp"
#include "sim/exec/engine.hpp"
#include "sim/strategies/load_experiment.hpp"

using namespace stepsim;

namespace {

std::vector<std::string> configs() {
  std::vector<std::string> out;
  for (const char* dir : {"/configs/examples", "/configs/examples/seed", "/bench/configs"})
    for (const auto& f : std::filesystem::directory_iterator(std::string(STEPSIM_SOURCE_DIR) + dir))
      // (the 4,096-layer bench config aside: seconds under the sanitizers for nothing the others lack)
      if (f.path().extension() == ".json" && !f.path().filename().string().starts_with("fsdp1-4096")) out.push_back(f.path().string());
  return out;
}

void check_same_simulation(const Timeline& full, const Timeline& lean) {
  CHECK(metrics_to_json(compute_metrics(lean)) == metrics_to_json(compute_metrics(full)));
  REQUIRE(lean.ops.size() == full.ops.size());
  for (std::size_t i = 0; i < full.ops.size(); ++i) {
    INFO("op " << i << " " << full.ops[i].name);
    CHECK(lean.ops[i].issue == full.ops[i].issue);
    CHECK(lean.ops[i].start == full.ops[i].start);
    CHECK(lean.ops[i].end == full.ops[i].end);
  }
  REQUIRE(lean.memory.size() == full.memory.size());
  for (std::size_t i = 0; i < full.memory.size(); ++i) {
    CHECK(lean.memory[i].time == full.memory[i].time);
    CHECK(lean.memory[i].total == full.memory[i].total);
    CHECK(lean.memory[i].reserved == full.memory[i].reserved);
  }
  CHECK(lean.rank_wait == full.rank_wait);
  CHECK(lean.start == full.start);
  CHECK(lean.end == full.end);
  CHECK(lean.host.empty());
  CHECK(lean.host_why.empty());
  CHECK(lean.op_why.empty());
}

}  // namespace

TEST_CASE("a metrics-only timeline is the same simulation as the full one", "[engine][detail]") {
  const auto files = configs();
  REQUIRE(files.size() >= 18);  // the examples, the seed cases and two bench configs at this writing
  std::size_t with_host = 0;  // the seed cases' ideal profile has no host costs, so no host intervals
  for (const std::string& f : files) {
    INFO(f);
    const Experiment e = load_experiment(f);
    const Program p = build_step_program(e);
    const Timeline full = simulate_program(p, e.cluster.profile, e.training.allocator);
    with_host += full.host.empty() ? 0 : 1;
    check_same_simulation(full, simulate_program(p, e.cluster.profile, e.training.allocator, {}, TimelineDetail::Metrics));
    // A random draw of each collective's slowest rank (simulate --samples), where the profile has a spread.
    if (e.cluster.profile->rank_variation.enabled()) {
      const RankOptions draw{true, 7};
      check_same_simulation(simulate_program(p, e.cluster.profile, e.training.allocator, draw),
                            simulate_program(p, e.cluster.profile, e.training.allocator, draw, TimelineDetail::Metrics));
    }
  }
  CHECK(with_host >= 8);
}
