// A step that does not fit beside the same step fitting (issue 49 item 1). Past the capacity every
// cudaMalloc the caching-allocator model cannot serve from its cache flushes it and retries
// (release_cached_blocks); sweeps look for where configs stop fitting, so that path must cost
// about what the fitting step costs. Each case runs one Program twice: with its profile's memory
// capacity, and with the capacity raised until nothing is flushed (the same instructions,
// fitting). Llama-3-70B also runs on 64 GPUs, where it fits without changing the capacity.
// Target: not fitting at most 1.5x fitting.
//   build/bench/oom_bench [repetitions] [case]
// `case` (a name below) runs one case; bench/run_all counts each one's instructions under
// callgrind (engine_not_fitting and engine_fitting, inclusive).
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <string>
#include <vector>

#include "bench/bench_args.hpp"
#include "sim/core/memory_policy.hpp"
#include "sim/exec/engine.hpp"
#include "sim/strategies/load_experiment.hpp"
#include "sim/strategies/strategy.hpp"

namespace {

using namespace stepsim;

const std::string kRoot = STEPSIM_SOURCE_DIR;

double cpu_us() { return static_cast<double>(std::clock()) * 1e6 / CLOCKS_PER_SEC; }

// One function each, so that callgrind can tell their instructions apart.
[[gnu::noinline]] Timeline engine_not_fitting(const Experiment& e, const Program& p) {
  return simulate_program(p, e.cluster.profile, e.training.allocator);
}
[[gnu::noinline]] Timeline engine_fitting(const Experiment& e, const Program& p) {
  return simulate_program(p, e.cluster.profile, e.training.allocator);
}

struct Run {
  double cpu_ms = 0;  // process CPU time, median (the machine may be shared)
  std::int64_t retries = 0, ooms = 0;
};

template <class Engine>
Run measure(Engine engine, const Experiment& e, const Program& p, int reps) {
  std::vector<double> cpu;
  Run r;
  for (int i = 0; i < reps; ++i) {
    const double c0 = cpu_us();
    Timeline t = engine(e, p);
    cpu.push_back((cpu_us() - c0) / 1000.0);
    r.retries = t.alloc_retries;
    r.ooms = t.alloc_ooms;
  }
  std::sort(cpu.begin(), cpu.end());
  r.cpu_ms = cpu[cpu.size() / 2];
  return r;
}

struct Case {
  std::string name;
  std::string file;
  std::vector<std::string> overrides;
  std::vector<std::string> fitting_overrides;  // another config that fits; empty: raise the capacity
};

void run_case(const Case& c, int reps) {
  Experiment e = load_experiment(c.file, c.overrides);
  const Program p = e.strategy->build(e);
  const Run oom = measure(engine_not_fitting, e, p, reps);
  std::string fitting_how;
  Run fit;
  std::size_t fitting_instructions = p.instructions.size();
  if (c.fitting_overrides.empty()) {
    e.cluster.profile.edit().memory_capacity = Bytes{e.cluster.profile->memory_capacity.count * 16};
    fit = measure(engine_fitting, e, p, reps);
    fitting_how = "the same program, 16x the capacity";
  } else {
    Experiment f = load_experiment(c.file, c.fitting_overrides);
    const Program q = f.strategy->build(f);
    fitting_instructions = q.instructions.size();
    fit = measure(engine_fitting, f, q, reps);
    fitting_how = "on more GPUs";
    for (const std::string& o : c.fitting_overrides) fitting_how += " " + o;
  }
  std::printf("%s: %zu instructions, %lld flushes (%lld OOMs) a step: median engine %.1f ms CPU; fitting (%s, %zu instructions, "
              "%lld flushes): %.1f ms CPU; ratio %.2f (target <= 1.5)\n",
              c.name.c_str(), p.instructions.size(), static_cast<long long>(oom.retries), static_cast<long long>(oom.ooms),
              oom.cpu_ms, fitting_how.c_str(), fitting_instructions, static_cast<long long>(fit.retries), fit.cpu_ms,
              oom.cpu_ms / fit.cpu_ms);
}

}  // namespace

int main(int argc, char** argv) {
  stepsim::keep_freed_memory();  // as the CLI does
  const bench::Args args{"oom_bench", "oom_bench [repetitions] [case]"};
  if (argc > 3) args.fail("too many arguments");
  const int reps = argc > 1 ? args.count("repetitions", argv[1], 1000) : 5;
  const std::string deep = kRoot + "/bench/configs/fsdp1-4096-layers-no-limit.json";
  const std::string llama3 = kRoot + "/bench/configs/llama3-70b-fsdp1-8xh100.json";
  const std::vector<Case> cases = {
      {"fsdp1-1024-layers", deep, {"workload.model.layers=1024"}, {}},
      {"fsdp1-4096-layers", deep, {"workload.model.layers=4096"}, {}},
      {"llama2-70b-1024-gpus", kRoot + "/bench/configs/llama2-70b-fsdp1-1024-oom.json", {}, {}},
      {"llama3-70b-8-gpus", llama3, {}, {}},
      {"llama3-70b-8-vs-64-gpus", llama3, {}, {"cluster.nodes=8"}},
  };
  const std::string only = argc > 2 ? argv[2] : "";
  if (!only.empty() && std::none_of(cases.begin(), cases.end(), [&](const Case& c) { return c.name == only; }))
    args.fail("case '" + only + "': expected one of fsdp1-1024-layers, fsdp1-4096-layers, llama2-70b-1024-gpus, llama3-70b-8-gpus, "
              "llama3-70b-8-vs-64-gpus");
  return args.run([&] {
    for (const Case& c : cases)
      if (only.empty() || c.name == only) run_case(c, reps);
    return 0;
  });
}
