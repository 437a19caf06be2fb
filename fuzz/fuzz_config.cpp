// Fuzzes the experiment reader: JSON with includes, --set overrides, every strategy's config,
// the workload builder and, for small programs, the engine.
// Input: EXP.json, then optionally "\n--include--\n" and the text of inc.json (which EXP.json
// can name as {"include": "inc.json"}), then optionally "\n--set--\n" and one --set
// assignment per line.
#include "fuzz/fuzz_common.hpp"
#include "sim/analysis/run.hpp"
#include "sim/exec/engine.hpp"
#include "sim/strategies/load_experiment.hpp"
#include "sim/strategies/strategy.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace stepsim;
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto sets_split = fuzz::split(in, "\n--set--\n");
  auto files = fuzz::split(sets_split[0], "\n--include--\n");
  auto exp = fuzz::write_file("exp.json", files[0]);
  fuzz::write_file("inc.json", files.size() > 1 ? files[1] : std::string_view("{}"));
  const std::vector<std::string> sets = fuzz::set_lines(sets_split);
  fuzz::expect_ok_or_input_error([&] {
    Experiment e = load_experiment(exp, sets);
    Program p = e.strategy->build(e);
    // The engine on small programs only: a fuzzer iteration must stay fast.
    if (p.instructions.size() <= 20000) (void)simulate_program(p, e.cluster.profile);
  });
  return 0;
}
