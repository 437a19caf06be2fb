// The in-process C++ call that stepsim.simulate (python/) makes: load the experiment, run it,
// and the metrics as JSON (what Result.metrics parses); median time per call.
// bench/python_simulate_bench.py runs this and the Python call and prints their ratio. Wall and
// CPU time (std::clock: this process's, which a loaded shared machine moves less) per call.
// --hold keeps each call's experiment and result until the next call has made its own, as a
// Python loop `r = stepsim.simulate(exp)` holds the previous Result while the next call runs.
//   build/bench/simulate_call_bench [EXP.json] [reps] [--hold]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <string>
#include <vector>

#include "bench/bench_args.hpp"
#include "sim/analysis/metrics.hpp"
#include "sim/analysis/run.hpp"
#include "sim/core/memory_policy.hpp"
#include "sim/strategies/load_experiment.hpp"

int main(int argc, char** argv) {
  using namespace stepsim;
  keep_freed_memory();  // as the CLI does (the Python process keeps glibc's defaults)
  const bench::Args args{"simulate_call_bench", "simulate_call_bench [EXP.json] [reps] [--hold]"};
  const bool hold = argc > 1 && std::string(argv[argc - 1]) == "--hold";
  if (hold) --argc;
  if (argc > 3) args.fail("too many arguments");
  const std::string file = argc > 1 ? argv[1] : std::string(STEPSIM_SOURCE_DIR) + "/configs/examples/llama3-8b-ddp-8xh100.json";
  const int reps = argc > 2 ? args.count("reps", argv[2], 1'000'000) : 100;
  return args.run([&] {
    std::vector<double> us, cpu_us;
    std::size_t sink = 0;
    Experiment held_experiment;
    SimulationResult held_result;
    for (int i = 0; i < reps; ++i) {
      const std::clock_t c0 = std::clock();
      auto t0 = std::chrono::steady_clock::now();
      Experiment e = load_experiment(file);
      SimulationResult r = run_experiment(e);
      sink += metrics_to_json(r.metrics).dump().size();
      if (hold) {  // the previous call's are freed here, after this call made its own
        held_experiment = std::move(e);
        held_result = std::move(r);
      }
      auto t1 = std::chrono::steady_clock::now();
      us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      cpu_us.push_back(1e6 * static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC);
    }
    std::sort(us.begin(), us.end());
    std::sort(cpu_us.begin(), cpu_us.end());
    std::printf("%s: median %.1f us per load + run + metrics%s, CPU %.1f us (%d reps, %zu bytes of metrics)\n", file.c_str(),
                us[us.size() / 2], hold ? " (each result held until the next)" : "", cpu_us[cpu_us.size() / 2], reps,
                sink / static_cast<std::size_t>(reps));
    return 0;
  });
}
