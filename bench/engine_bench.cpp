// Engine speed: simulate a step repeatedly and report the median engine time per step.
//   build/bench/engine_bench [EXP.json] [repetitions]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "bench/bench_args.hpp"
#include "sim/core/memory_policy.hpp"
#include "sim/analysis/run.hpp"
#include "sim/exec/engine.hpp"
#include "sim/strategies/load_experiment.hpp"
#include "sim/strategies/strategy.hpp"

int main(int argc, char** argv) {
  stepsim::keep_freed_memory();  // as the CLI does
  using namespace stepsim;
  const bench::Args args{"engine_bench", "engine_bench [EXP.json] [reps]"};
  if (argc > 3) args.fail("too many arguments");
  std::string file = argc > 1 ? argv[1] : std::string(STEPSIM_SOURCE_DIR) + "/configs/examples/llama3-8b-ddp-8xh100.json";
  const int reps = argc > 2 ? args.count("reps", argv[2], 1'000'000) : 200;
  return args.run([&] {
  Experiment e = load_experiment(file);
  Program p = e.strategy->build(e);
  std::vector<double> build_us, engine_us;
  for (int i = 0; i < reps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    Program q = e.strategy->build(e);
    auto t1 = std::chrono::steady_clock::now();
    Timeline t = simulate_program(q, e.cluster.profile);
    auto t2 = std::chrono::steady_clock::now();
    build_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    engine_us.push_back(std::chrono::duration<double, std::micro>(t2 - t1).count());
  }
  std::sort(build_us.begin(), build_us.end());
  std::sort(engine_us.begin(), engine_us.end());
  std::printf("%s: %zu instructions; median build %.1f us, median engine %.1f us (%d reps)\n", file.c_str(),
              p.instructions.size(), build_us[build_us.size() / 2], engine_us[engine_us.size() / 2], reps);
  return 0;
  });
}
