// Speed and memory of explain/sweep (issue 5); numbers go to the README, never into tests.
//   sweep_bench engine [reps]         Llama-3-70B FSDP1 on 1,024 GPUs: median engine time of one step
//                                      (falls back to DDP, and says so, when fsdp1 is not built)
//   sweep_bench sweep N [jobs]        an N-point sweep of Llama-3-8B on 8-128 GPUs, rows streamed to
//                                      a temporary CSV; prints wall time and max RSS
//   sweep_bench build N [jobs]        the same on 32 GPUs over N sequence lengths: every point
//                                      builds its workload (the 1,000,000-point sweep's points do)
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "bench/bench_args.hpp"
#include "sim/core/memory_policy.hpp"
#include "sim/explore/sweep.hpp"
#include "sim/core/error.hpp"
#include "sim/exec/engine.hpp"
#include "sim/strategies/load_experiment.hpp"
#include "sim/strategies/strategy.hpp"

using namespace stepsim;

namespace {

const std::string kRoot = STEPSIM_SOURCE_DIR;

long max_rss_kib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

nlohmann::json experiment_doc(const std::string& preset, const std::string& framework, int nodes) {
  return {{"workload", {{"preset", preset}, {"seq_len", 4096}, {"micro_batch", 1}, {"dtype", "bf16"}, {"activation_checkpointing", "full"}}},
          {"cluster", {{"profile", kRoot + "/configs/hardware/h100-sxm-8x.json"}, {"nodes", nodes}, {"gpus_per_node", 8}}},
          {"strategy", {{"framework", framework}}},
          {"training", {{"optimizer", "adamw"}}}};
}

int engine(int reps) {
  std::string fw = "fsdp1";
  SourceMap src;
  src.root_file = "(bench)";
  Experiment e;
  try {
    e = experiment_from_json(experiment_doc("llama3-70b", fw, 128), src);
  } catch (const InputError& ex) {
    std::printf("fsdp1 unavailable (%s): measuring DDP instead\n", ex.what());
    fw = "ddp";
    e = experiment_from_json(experiment_doc("llama3-70b", fw, 128), src);
  }
  Program p = e.strategy->build(e);
  std::vector<double> us;
  for (int i = 0; i < reps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    Timeline t = simulate_program(p, e.cluster.profile);
    auto t1 = std::chrono::steady_clock::now();
    us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  std::sort(us.begin(), us.end());
  std::printf("llama3-70b %s on 1024 GPUs: %zu instructions; engine median %.1f us, min %.1f us (%d reps)\n", fw.c_str(),
              p.instructions.size(), us[us.size() / 2], us.front(), reps);
  return 0;
}

int sweep(std::uint64_t n, int jobs, bool every_point_builds) {
  // Llama-3-8B on 1..16 nodes of 8 GPUs; the other axis (sequence length) fills the point
  // count: every point is a distinct configuration that is built and simulated. Past 16 x 8,192
  // points a block of the runner's (SweepSpec::kEvaluationBlock) holds one node count's sequence
  // lengths, each a workload of its own; `every_point_builds` has every point so (4 nodes).
  SweepSpec spec;
  spec.file = "(bench)";
  spec.base_sources.root_file = "(bench)";
  std::string fw = "fsdp1";
  try {
    experiment_from_json(experiment_doc("llama3-8b", fw, 1), spec.base_sources);
  } catch (const InputError&) {
    fw = "ddp";
  }
  spec.base = experiment_doc("llama3-8b", fw, 1);
  SweepAxis nodes{"cluster.nodes", {}}, seq{"workload.seq_len", {}};
  const int node_counts = every_point_builds ? 1 : 16;
  for (int k = 1; k <= node_counts; ++k) nodes.values.push_back(every_point_builds ? 4 : k);
  for (std::uint64_t k = 0; k < (n + node_counts - 1) / node_counts; ++k) seq.values.push_back(1024 + 8 * k);
  spec.axes = {nodes, seq};
  spec.columns = {"cluster.nodes", "workload.seq_len"};
  spec.constraints.push_back(parse_constraint("peak_memory_gib <= 80", "bench"));
  auto csv_path = std::filesystem::temp_directory_path() / "stepsim_sweep_bench.csv";
  std::ofstream csv(csv_path);
  csv << sweep_csv_header(spec) << "\n";
  SweepOptions o;
  o.jobs = jobs;
  auto t0 = std::chrono::steady_clock::now();
  SweepSummary s = run_sweep(spec, o, [&](const SweepRow& r) { csv << sweep_csv_row(r) << "\n"; });
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("sweep of %llu points (llama3-8b %s, %s), %d jobs: %.2f s (%.0f points/s), %llu ok; max RSS %ld MiB\n",
              static_cast<unsigned long long>(s.total()), fw.c_str(),
              every_point_builds ? "32 GPUs, a sequence length a point" : "8-128 GPUs", jobs, secs, static_cast<double>(s.total()) / secs,
              static_cast<unsigned long long>(s.ok()), max_rss_kib() / 1024);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  stepsim::keep_freed_memory();  // as the CLI does
  const stepsim::bench::Args args{"sweep_bench", "sweep_bench engine [reps] | sweep N [jobs] | build N [jobs]"};
  std::string mode = argc > 1 ? argv[1] : "engine";
  if (mode == "engine") {
    if (argc > 3) args.fail("too many arguments");
    return args.run([&] { return engine(argc > 2 ? args.count("reps", argv[2], 1'000'000) : 50); });
  }
  if (mode == "sweep" || mode == "build") {
    if (argc > 4) args.fail("too many arguments");
    const int points = argc > 2 ? args.count("N", argv[2], 100'000'000) : 10000;
    const int jobs = argc > 3 ? args.count("jobs", argv[3], 1024) : 2;
    return args.run([&] { return sweep(static_cast<std::size_t>(points), jobs, mode == "build"); });
  }
  args.fail("'" + mode + "': expected engine, sweep or build");
}
