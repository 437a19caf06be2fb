// Seed case C6 through a sweep: the orderings of backward_prefetch and limit_all_gathers on
// a Llama-3-8B FSDP1 workload (configs/sweeps/c6-llama8b-fsdp1-prefetch.json) show in the CSV.
#include <map>
#include <sstream>

#include <catch2/catch.hpp>

#include "sim/explore/sweep.hpp"

using namespace stepsim;

TEST_CASE("a sweep over backward_prefetch and limit_all_gathers on Llama-8B shows the C6 orderings in its CSV",
          "[sweep][needs-fsdp1]") {
  SweepSpec s = load_sweep(std::string(STEPSIM_SOURCE_DIR) + "/configs/sweeps/c6-llama8b-fsdp1-prefetch.json");
  SweepOptions o;
  o.jobs = 2;
  std::ostringstream csv;
  csv << sweep_csv_header(s) << "\n";
  run_sweep(s, o, [&](const SweepRow& r) { csv << sweep_csv_row(r) << "\n"; });
  // Read the orderings back from the CSV text itself.
  std::istringstream in(csv.str());
  std::string line;
  std::getline(in, line);
  auto head = split_csv_line(line);
  auto col = [&](const char* n) { return static_cast<std::size_t>(std::find(head.begin(), head.end(), n) - head.begin()); };
  std::map<std::string, double> step, mem;  // "prefetch/limit" -> value
  while (std::getline(in, line)) {
    auto f = split_csv_line(line);
    INFO(line);
    REQUIRE(f[col("status")] == "ok");
    std::string key = f[col("strategy.backward_prefetch")] + "/" + f[col("strategy.limit_all_gathers")];
    step[key] = std::stod(f[col("step_time_ns")]);
    mem[key] = std::stod(f[col("peak_memory_bytes")]);
  }
  REQUIRE(step.size() == 6);
  // Throughput: none < BACKWARD_POST <= BACKWARD_PRE (step time the other way round).
  for (const char* lim : {"true", "false"}) {
    std::string l = lim;
    CHECK(step["none/" + l] > step["backward_post/" + l]);
    CHECK(step["backward_post/" + l] >= step["backward_pre/" + l]);
  }
  // Peak memory: none <= POST <= PRE with the limit < PRE without the limit.
  CHECK(mem["none/true"] <= mem["backward_post/true"]);
  CHECK(mem["backward_post/true"] <= mem["backward_pre/true"]);
  CHECK(mem["backward_pre/true"] < mem["backward_pre/false"]);
}
