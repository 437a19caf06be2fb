// stepsim compare A B [--tolerance 5%] [--memory-tolerance P] [--steps A-B] [--json]
// Exit 0: step time and peak memory within tolerance; 3: outside; 2: bad input.
#include <fstream>
#include <iostream>

#include "sim/report/compare.hpp"
#include "sim/core/error.hpp"
#include "tools/cli_common.hpp"
#include "trace/compare_files.hpp"

namespace stepsim::cli {

int compare(const Args& args) {
  po::options_description opts("compare options");
  std::string a_file, b_file, tolerance = "5%", memory_tolerance, steps;
  opts.add_options()("first", po::value(&a_file)->required(), "first result (predicted, or the baseline simulation)")(
      "second", po::value(&b_file)->required(), "second result (measured by live, or the changed simulation)")(
      "tolerance", po::value(&tolerance), "allowed |relative error| of step time, e.g. 5% (default 5%)")(
      "memory-tolerance", po::value(&memory_tolerance), "allowed |relative error| of peak memory (default: --tolerance)")(
      "steps", po::value(&steps), "for a trace given as a file: the ProfilerSteps to average, N, A-B, A- or -B (default: all)")(
      "json", "print the comparison as JSON (schema stepsim.compare/1)");
  po::positional_options_description pos;
  pos.add("first", 1).add("second", 1);
  po::variables_map vm;
  if (!parse_args(args,
                  "usage: stepsim compare PREDICTED.json MEASURED [--tolerance 5%] [--memory-tolerance P] [--steps A-B] [--json]\n"
                  "Each file is stepsim.result/1 (simulate --json, live --out), stepsim.analyze/1 (analyze --json) or a\n"
                  "PyTorch profiler trace (.json or .json.gz, analysed as analyze does: the mean of its steps, or of\n"
                  "--steps). Errors are relative to the measured file (live's result, a trace); between two\n"
                  "simulations, relative to the first. Exit 3 when step time or peak memory is outside its\n"
                  "tolerance, 2 on bad input, 0 otherwise.",
                  opts, pos, vm))
    return 0;
  CompareOptions o;
  o.tolerance_pct = parse_tolerance_pct(tolerance, "--tolerance");
  o.memory_tolerance_pct = memory_tolerance.empty() ? o.tolerance_pct : parse_tolerance_pct(memory_tolerance, "--memory-tolerance");
  CompareReport r = trace::compare_files(a_file, b_file, steps, o);
  if (vm.count("json")) std::cout << compare_to_json(r).dump(1) << "\n";
  else write_compare_table(std::cout, r);
  return r.pass() ? 0 : 3;
}

}  // namespace stepsim::cli
