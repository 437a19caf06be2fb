// Engine time where record_stream frees pile up (issue 16 item 5). Each pending free is keyed
// on its last outstanding op, so a completion costs O(1) amortized however many are pending.
// Targets: FSDP1 with limit_all_gathers false at 4,096 layers under 50 ms of engine time; the
// ZeRO-3 example's engine time per instruction at most FSDP2's.
//   build/bench/pending_free_bench [repetitions]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/bench_args.hpp"
#include "sim/core/memory_policy.hpp"
#include "sim/exec/engine.hpp"
#include "sim/strategies/load_experiment.hpp"
#include "sim/strategies/strategy.hpp"

namespace {

struct Result {
  std::size_t instructions = 0;
  double engine_us = 0;      // wall clock, median
  double engine_cpu_us = 0;  // process CPU time, median (the machine may be shared)
  double no_allocator_cpu_us = 0;  // the same without the caching allocator model
  // Its allocated bytes exceed the device: the engine skips the steady-state replay of the
  // allocator's traffic (PyTorch would raise OutOfMemoryError in the first step; docs/limits.md).
  bool does_not_fit = false;
};

double cpu_us() { return static_cast<double>(std::clock()) * 1e6 / CLOCKS_PER_SEC; }

Result measure(const std::string& file, const std::vector<std::string>& overrides, int reps) {
  using namespace stepsim;
  Experiment e = load_experiment(file, overrides);
  Program p = e.strategy->build(e);
  std::vector<double> wall, cpu, cpu_plain;
  bool does_not_fit = false;
  AllocatorConfig plain = e.training.allocator;
  plain.enabled = false;
  for (int i = 0; i < reps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    double c0 = cpu_us();
    Timeline t = simulate_program(p, e.cluster.profile, e.training.allocator);
    double c1 = cpu_us();
    Bytes peak;
    for (const MemorySample& m : t.memory) peak = std::max(peak, m.total);
    does_not_fit = t.capacity.count > 0 && peak + t.non_pytorch > t.capacity;
    auto t1 = std::chrono::steady_clock::now();
    Timeline u = simulate_program(p, e.cluster.profile, plain);
    double c2 = cpu_us();
    wall.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    cpu.push_back(c1 - c0);
    cpu_plain.push_back(c2 - c1);
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  return {p.instructions.size(), median(wall), median(cpu), median(cpu_plain), does_not_fit};
}

}  // namespace

int main(int argc, char** argv) {
  stepsim::keep_freed_memory();  // as the CLI does
  const stepsim::bench::Args args{"pending_free_bench", "pending_free_bench [repetitions]"};
  if (argc > 2) args.fail("too many arguments");
  const int reps = argc > 1 ? args.count("repetitions", argv[1], 1000) : 5;
  return args.run([&] {
    const std::string src = STEPSIM_SOURCE_DIR;
    const std::string deep = src + "/bench/configs/fsdp1-4096-layers-no-limit.json";
    for (int layers : {1024, 4096}) {
      Result r = measure(deep, {"workload.model.layers=" + std::to_string(layers)}, reps);
      std::printf(
          "fsdp1 limit_all_gathers=false, %d layers: %zu instructions, median engine %.1f ms wall, %.1f ms CPU (%.1f ms CPU "
          "without the allocator model)%s (target at 4,096: < 50 ms)\n",
          layers, r.instructions, r.engine_us / 1000.0, r.engine_cpu_us / 1000.0, r.no_allocator_cpu_us / 1000.0,
          r.does_not_fit ? "; does not fit its device, so no steady-state replay" : "");
    }
    Result z3 = measure(src + "/configs/examples/opt-1.3b-zero3-8xa800.json", {}, reps * 4);
    Result f2 = measure(src + "/configs/examples/llama3-8b-fsdp2-8xh100.json", {}, reps * 4);
    double z3_per = z3.engine_cpu_us * 1000.0 / static_cast<double>(z3.instructions);
    double f2_per = f2.engine_cpu_us * 1000.0 / static_cast<double>(f2.instructions);
    std::printf("zero3 example: %zu instructions, median engine %.2f ms wall, %.2f ms CPU, %.0f ns CPU per instruction\n",
                z3.instructions, z3.engine_us / 1000.0, z3.engine_cpu_us / 1000.0, z3_per);
    std::printf("fsdp2 example: %zu instructions, median engine %.2f ms wall, %.2f ms CPU, %.0f ns CPU per instruction\n",
                f2.instructions, f2.engine_us / 1000.0, f2.engine_cpu_us / 1000.0, f2_per);
    std::printf("zero3 / fsdp2 per instruction: %.2f (target <= 1)\n", z3_per / f2_per);
    return 0;
  });
}
