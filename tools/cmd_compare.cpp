// stepsim compare A B [--tolerance 5%] [--memory-tolerance P] [--steps A-B] [--json]
// Exit 0: step time and peak memory within tolerance; 3: outside; 2: bad input.
#include <fstream>
#include <iostream>

#include "sim/report/compare.hpp"
#include "sim/config/json_reader.hpp"
#include "sim/core/error.hpp"
#include "tools/cli_common.hpp"
#include "trace/trace_analysis.hpp"

namespace stepsim::cli {

namespace {

// A result, or a trace analysed as `analyze --json` would (its steps' mean; `steps` as --steps).
// Strict like every config: a directory, a duplicate key or a number no double holds is bad input.
nlohmann::json read_side(const std::string& file, bool is_trace, const std::string& steps) {
  if (!is_trace) return read_json_file(file);
  trace::AnalyzeOptions o;
  if (!steps.empty()) trace::parse_step_range(steps, o);
  std::vector<trace::KinetoTrace> traces;
  traces.push_back(trace::read_kineto_trace(file));
  return trace::job_to_json(trace::analyze_job(traces, o));
}

}  // namespace

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
  const bool a_trace = trace::looks_like_kineto_trace(a_file), b_trace = trace::looks_like_kineto_trace(b_file);
  if (!steps.empty() && !a_trace && !b_trace)
    throw InputError("compare: --steps " + steps + ": expected a trace among the files (it picks the trace's ProfilerSteps)");
  nlohmann::json a = read_side(a_file, a_trace, steps);
  nlohmann::json b = read_side(b_file, b_trace, steps);
  CompareReport r = compare_results(a, a_file, b, b_file, o);
  if (vm.count("json")) std::cout << compare_to_json(r).dump(1) << "\n";
  else write_compare_table(std::cout, r);
  return r.pass() ? 0 : 3;
}

}  // namespace stepsim::cli
