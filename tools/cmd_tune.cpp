// stepsim tune EXP.json [--memory-cap 80GiB] [--objective O] [--set path=value]... [--jobs N] [--max-grid N] [--json]
#include <iostream>

#include "sim/explore/tune.hpp"
#include "tools/cli_common.hpp"

namespace stepsim::cli {

int tune(const Args& args) {
  po::options_description opts("tune options");
  std::string exp_file, cap, objective;
  std::vector<std::string> sets;
  TuneOptions o;
  std::int64_t max_grid = static_cast<std::int64_t>(o.max_grid);
  opts.add_options()("experiment", po::value(&exp_file)->required(), "experiment JSON")(
      "memory-cap", po::value(&cap), "limit on peak reserved memory, e.g. 80GiB (default: the profile's device capacity)")(
      "objective", po::value(&objective), "step_time (default), tokens_per_s or mfu: the same ranking here, tune keeps the global batch")(
      "set", po::value(&sets)->composing(), "override a config value before tuning: path=value (repeatable)")(
      "jobs,j", po::value(&o.jobs), "worker threads (default: all cores)")(
      "max-grid", po::value(&max_grid), "search the full grid up to this many points, else coordinate descent (default 4096)")(
      "json", "print the result as JSON (schema stepsim.tune/1)");
  po::positional_options_description pos;
  pos.add("experiment", 1);
  po::variables_map vm;
  if (!parse_args(args, "usage: stepsim tune EXP.json [--memory-cap 80GiB] [--objective step_time|tokens_per_s|mfu] [--set path=value]... [--json]", opts, pos, vm)) return 0;
  o.max_grid = static_cast<std::size_t>(integer_option("max-grid", max_grid, 1, kMaxTuneGrid));
  if (!cap.empty()) o.memory_cap = parse_memory_size(cap);
  if (vm.count("objective")) o.objective = parse_objective(objective);
  TuneResult r = tune_file(exp_file, sets, o);
  if (vm.count("json")) std::cout << tune_to_json(r).dump(1) << "\n";
  else {
    std::cout << "stepsim tune: " << exp_file << "\n";
    write_tune_text(std::cout, r);
  }
  return r.found ? 0 : 3;
}

}  // namespace stepsim::cli
