// Fuzzes the DeepSpeed config translation (sim/config/foreign_configs.cpp): the batch triangle
// against the experiment's cluster, precision, ZeRO keys, "auto" values, and the experiment's
// own checks of what the translation wrote. Input: the DeepSpeed config (ds.json), then
// optionally "\n--experiment--\n" and the experiment that names it (default: a Llama-3-8B
// experiment on 8 H100s naming ds.json), then optionally "\n--set--\n" and one --set per line.
#include "fuzz/fuzz_common.hpp"
#include "sim/strategies/load_experiment.hpp"
#include "sim/strategies/strategy.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace stepsim;
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto sets_split = fuzz::split(in, "\n--set--\n");
  auto files = fuzz::split(sets_split[0], "\n--experiment--\n");
  fuzz::write_file("ds.json", files[0]);
  auto exp = fuzz::write_file(
      "exp.json", files.size() > 1 ? files[1]
                                   : std::string_view(R"({"workload": {"preset": "llama3-8b", "seq_len": 4096, "dtype": "bf16"},
 "cluster": {"profile": "configs/hardware/h100-sxm-8x.json", "nodes": 1, "gpus_per_node": 8},
 "strategy": {"deepspeed_config": "ds.json"}, "training": {"optimizer": "adamw"}})"));
  const std::vector<std::string> sets = fuzz::set_lines(sets_split);
  fuzz::expect_ok_or_input_error([&] {
    Experiment e = load_experiment(exp, sets);
    (void)e.strategy->build(e);
  });
  return 0;
}
