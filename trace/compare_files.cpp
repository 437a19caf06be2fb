#include "trace/compare_files.hpp"

#include <vector>

#include "sim/config/json_reader.hpp"
#include "sim/core/error.hpp"
#include "trace/kineto_trace.hpp"
#include "trace/trace_analysis.hpp"

namespace stepsim::trace {

namespace {

// A result, or a trace analysed as `analyze --json` would (its steps' mean; `steps` as --steps).
// Strict like every config: a directory, a duplicate key or a number no double holds is bad input.
nlohmann::json read_side(const std::string& file, bool is_trace, const std::string& steps) {
  if (!is_trace) return read_json_file(file);
  AnalyzeOptions o;
  if (!steps.empty()) parse_step_range(steps, o);
  std::vector<KinetoTrace> traces;
  traces.push_back(read_kineto_trace(file, ReadOptions{.host_ops = false, .fit_records = false}));  // no idle attribution
  return job_to_json(analyze_job(traces, o));
}

}  // namespace

CompareReport compare_files(const std::string& first, const std::string& second, const std::string& steps,
                            const CompareOptions& o) {
  const bool a_trace = looks_like_kineto_trace(first), b_trace = looks_like_kineto_trace(second);
  if (!steps.empty() && !a_trace && !b_trace)
    throw InputError("compare: --steps " + steps + ": expected a trace among the files (it picks the trace's ProfilerSteps)");
  nlohmann::json a = read_side(first, a_trace, steps);
  nlohmann::json b = read_side(second, b_trace, steps);
  return compare_results(a, first, b, second, o);
}

}  // namespace stepsim::trace
