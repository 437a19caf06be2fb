// stepsim tune EXP.json [--memory-cap 80GiB] [--set path=value]... [--jobs N] [--max-grid N] [--json]
#include <iostream>

#include "sim/explore/tune.hpp"
#include "tools/cli_common.hpp"

namespace stepsim::cli {

int tune(const Args& args) {
  po::options_description opts("tune options");
  std::string exp_file, cap;
  std::vector<std::string> sets;
  TuneOptions o;
  opts.add_options()("experiment", po::value(&exp_file)->required(), "experiment JSON")(
      "memory-cap", po::value(&cap), "peak memory limit, e.g. 80GiB (default: the profile's device capacity)")(
      "set", po::value(&sets)->composing(), "override a config value before tuning: path=value (repeatable)")(
      "jobs,j", po::value(&o.jobs), "worker threads (default: all cores)")(
      "max-grid", po::value(&o.max_grid), "search the full grid up to this many points, else coordinate descent (default 4096)")(
      "json", "print the result as JSON (schema stepsim.tune/1)");
  po::positional_options_description pos;
  pos.add("experiment", 1);
  po::variables_map vm;
  if (!parse_args(args, "usage: stepsim tune EXP.json [--memory-cap 80GiB] [--set path=value]... [--json]", opts, pos, vm)) return 0;
  if (!cap.empty()) o.memory_cap = parse_memory_size(cap);
  TuneResult r = tune_file(exp_file, sets, o);
  if (vm.count("json")) std::cout << tune_to_json(r).dump(1) << "\n";
  else {
    std::cout << "stepsim tune: " << exp_file << "\n";
    write_tune_text(std::cout, r);
  }
  return r.found ? 0 : 3;
}

}  // namespace stepsim::cli
