// FSDP1 program build time against the layer count (issue 16, item 5): with the host far ahead
// (limit_all_gathers false) and a toy model of N identical layers, one FSDP unit per layer, the
// build must grow linearly: the time per layer at 4,096 layers stays that at 1,024.
//   build/bench/fsdp1_build_bench [repetitions]
// Prints, per layer count, the instruction count and the median build time (and, for
// reference, the median engine time, which issue 16 gives to the engine's own benchmark).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/bench_args.hpp"
#include "sim/exec/engine.hpp"
#include "sim/strategies/load_experiment.hpp"
#include "sim/strategies/strategy.hpp"

namespace {

stepsim::Experiment fsdp1_toy(int layers) {
  nlohmann::json doc = {
      {"workload", {{"toy", {{"layers", layers}, {"forward_ms", 1}, {"backward_ms", 2}, {"params_per_layer", 1000000},
                             {"activation_bytes_per_layer", 1000000}}}}},
      {"cluster", {{"profile", std::string(STEPSIM_SOURCE_DIR) + "/configs/hardware/toy-ideal.json"}, {"nodes", 1}, {"gpus_per_node", 8}}},
      {"strategy", {{"framework", "fsdp1"}, {"limit_all_gathers", false}}}};
  stepsim::SourceMap sources;
  sources.root_file = "fsdp1_build_bench";
  return stepsim::experiment_from_json(doc, sources);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  using namespace stepsim;
  const bench::Args args{"fsdp1_build_bench", "fsdp1_build_bench [repetitions]"};
  if (argc > 2) args.fail("too many arguments");
  const int reps = argc > 1 ? args.count("repetitions", argv[1], 1000) : 5;
  double per_layer_1024 = 0;
  for (int layers : {256, 1024, 4096}) {
    Experiment e = fsdp1_toy(layers);
    std::vector<double> build_ms, engine_ms;
    std::size_t instructions = 0;
    for (int i = 0; i < reps; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      Program p = e.strategy->build(e);
      auto t1 = std::chrono::steady_clock::now();
      instructions = p.instructions.size();
      build_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      if (i == 0 || layers <= 1024) {
        auto t2 = std::chrono::steady_clock::now();
        Timeline t = simulate_program(p, e.cluster.profile);
        auto t3 = std::chrono::steady_clock::now();
        engine_ms.push_back(std::chrono::duration<double, std::milli>(t3 - t2).count());
      }
    }
    const double b = median(build_ms);
    if (layers == 1024) per_layer_1024 = b / layers;
    std::printf("fsdp1 limit_all_gathers=false, %5d layers: %8zu instructions; median build %8.2f ms (%.2f us/layer)%s; engine %8.1f ms\n",
                layers, instructions, b, 1e3 * b / layers,
                layers == 4096 && per_layer_1024 > 0 ? (b / layers <= 2 * per_layer_1024 ? " linear" : " SUPERLINEAR") : "",
                median(engine_ms));
  }
}
