// `stepsim analyze TRACE... [--steps a-b] [--json]`: the DESIGN.md section 5 metrics measured on
// PyTorch profiler (Kineto) traces, or on `stepsim simulate --trace` output (round trip).
#include <iostream>

#include "trace/trace_analysis.hpp"
#include <fmt/format.h>

#include "sim/core/error.hpp"
#include "tools/cli_common.hpp"

namespace stepsim::cli {

int analyze(const Args& args) {
  po::options_description opts("analyze options");
  std::vector<std::string> files;
  std::string steps;
  int top = 10;
  opts.add_options()("trace", po::value(&files)->multitoken(), "trace files (.json or .json.gz), one per rank")(
      "steps", po::value(&steps), "ProfilerStep numbers to report: N, A-B, A- or -B (default: all)")(
      "top", po::value(&top)->default_value(10), "how many top exposed collectives to list")(
      "json", "print stepsim.analyze/1 JSON instead of the text report");
  po::positional_options_description pos;
  pos.add("trace", -1);
  po::variables_map vm;
  const std::string usage =
      "usage: stepsim analyze TRACE... [--steps A-B] [--json]\n"
      "Measures step time, compute, communication, overlap (HTA's comp_comm_overlap_pctg), idle and\n"
      "phases per ProfilerStep of Kineto traces; several traces (one per rank) add a per-rank table\n"
      "and the straggler spread.";
  if (!parse_args(args, usage, opts, pos, vm)) return 0;
  if (files.empty()) throw InputError("analyze: no trace given: expected at least one TRACE (see --help)");
  if (top < 0 || top > 1000000) throw InputError(fmt::format("--top {}: expected a count from 0 to 1000000", top));
  trace::AnalyzeOptions o;
  o.top_exposed = top;
  if (!steps.empty()) trace::parse_step_range(steps, o);
  std::vector<trace::KinetoTrace> traces;
  for (const auto& f : files) traces.push_back(trace::read_kineto_trace(f));
  trace::JobAnalysis job = trace::analyze_job(traces, o);
  if (vm.count("json")) std::cout << trace::job_to_json(job).dump(2) << "\n";
  else std::cout << trace::job_to_text(job);
  return 0;
}

}  // namespace stepsim::cli
