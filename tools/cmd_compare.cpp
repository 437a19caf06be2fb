// stepsim compare A.json B.json [--tolerance 5%] [--memory-tolerance P] [--json]
// Exit 0: step time and peak memory within tolerance; 3: outside; 2: bad input.
#include <fstream>
#include <iostream>

#include "sim/report/compare.hpp"
#include "sim/config/json_reader.hpp"
#include "sim/core/error.hpp"
#include "tools/cli_common.hpp"

namespace stepsim::cli {

namespace {

// Strict like every config: a directory, a duplicate key or a number no double holds is bad input.
nlohmann::json read_result(const std::string& file) { return read_json_file(file); }

}  // namespace

int compare(const Args& args) {
  po::options_description opts("compare options");
  std::string a_file, b_file, tolerance = "5%", memory_tolerance;
  opts.add_options()("first", po::value(&a_file)->required(), "first result (predicted, or the baseline simulation)")(
      "second", po::value(&b_file)->required(), "second result (measured by live, or the changed simulation)")(
      "tolerance", po::value(&tolerance), "allowed |relative error| of step time, e.g. 5% (default 5%)")(
      "memory-tolerance", po::value(&memory_tolerance), "allowed |relative error| of peak memory (default: --tolerance)")(
      "json", "print the comparison as JSON (schema stepsim.compare/1)");
  po::positional_options_description pos;
  pos.add("first", 1).add("second", 1);
  po::variables_map vm;
  if (!parse_args(args,
                  "usage: stepsim compare PREDICTED.json MEASURED.json [--tolerance 5%] [--memory-tolerance P] [--json]\n"
                  "Both files are stepsim.result/1 (simulate --json, live --out). Errors are relative to the measured\n"
                  "file (the one from live); between two simulations, relative to the first. Exit 3 when step time or\n"
                  "peak memory is outside its tolerance, 2 on bad input, 0 otherwise.",
                  opts, pos, vm))
    return 0;
  CompareOptions o;
  o.tolerance_pct = parse_tolerance_pct(tolerance, "--tolerance");
  o.memory_tolerance_pct = memory_tolerance.empty() ? o.tolerance_pct : parse_tolerance_pct(memory_tolerance, "--memory-tolerance");
  nlohmann::json a = read_result(a_file);
  nlohmann::json b = read_result(b_file);
  CompareReport r = compare_results(a, a_file, b, b_file, o);
  if (vm.count("json")) std::cout << compare_to_json(r).dump(1) << "\n";
  else write_compare_table(std::cout, r);
  return r.pass() ? 0 : 3;
}

}  // namespace stepsim::cli
