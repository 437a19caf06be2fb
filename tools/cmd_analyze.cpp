// `stepsim analyze TRACE... [--steps a-b] [--json]`: the DESIGN.md section 5 metrics measured on
// PyTorch profiler (Kineto) traces, or on `stepsim simulate --trace` output (round trip).
#include <algorithm>
#include <iostream>
#include <optional>

#include "trace/allocator_replay.hpp"
#include "trace/idle_attribution.hpp"
#include "trace/trace_analysis.hpp"
#include <fmt/format.h>

#include "sim/core/error.hpp"
#include "sim/core/memory_policy.hpp"
#include "tools/cli_common.hpp"

namespace stepsim::cli {

int analyze(const Args& args) {
  po::options_description opts("analyze options");
  std::vector<std::string> files;
  std::string steps;
  int top = 10;
  opts.add_options()("trace", po::value(&files)->multitoken(), "trace files (.json or .json.gz), one per rank")(
      "steps", po::value(&steps), "ProfilerStep numbers to report: N, A-B, A- or -B (default: all)")(
      "top", po::value(&top)->default_value(10), "how many top exposed collectives (and idle causes) to list")(
      "json", "print stepsim.analyze/1 JSON instead of the text report")(
      "allocator-replay", "also run each trace's own allocator events through stepsim's caching-allocator model "
                          "(peak reserved of the real sequence; docs/analyze.md)")(
      "idle", "also attribute the GPU's idle time: each gap between GPU ops charged to what the host did before the next "
              "one (still busy in an operator, or waiting in a synchronising call); docs/analyze.md");
  po::positional_options_description pos;
  pos.add("trace", -1);
  po::variables_map vm;
  const std::string usage =
      "usage: stepsim analyze TRACE... [--steps A-B] [--json] [--allocator-replay] [--idle]\n"
      "Measures step time, compute, communication, overlap (HTA's comp_comm_overlap_pctg), idle and\n"
      "phases per ProfilerStep of Kineto traces; several traces (one per rank) add a per-rank table\n"
      "and the straggler spread.";
  if (!parse_args(args, usage, opts, pos, vm)) return 0;
  if (files.empty()) throw InputError("analyze: no trace given: expected at least one TRACE (see --help)");
  trace::AnalyzeOptions o;
  o.top_exposed = static_cast<int>(top_rows(top));
  if (!steps.empty()) trace::parse_step_range(steps, o);
  std::vector<trace::KinetoTrace> traces;
  return_freed_memory();  // records in growing arrays, no simulation: give freed copies back
  // Host operators and Python frames (most of a trace's events) only for --idle: memory stays
  // flat in the trace's size without it (docs/limits.md).
  const trace::ReadOptions read{.host_ops = vm.count("idle") > 0, .fit_records = false};
  for (const auto& f : files) traces.push_back(trace::read_kineto_trace(f, read));
  trace::JobAnalysis job = trace::analyze_job(traces, o);
  const bool json = vm.count("json") > 0;
  nlohmann::json out = json ? trace::job_to_json(job) : nlohmann::json();
  std::string text = json ? std::string() : trace::job_to_text(job);
  auto trace_of = [&](const trace::TraceAnalysis& a) -> const trace::KinetoTrace& {
    return *std::find_if(traces.begin(), traces.end(), [&](const trace::KinetoTrace& k) { return k.file == a.file; });
  };
  if (vm.count("allocator-replay")) {
    if (json) out["allocator_replay"] = nlohmann::json::array();
    for (const auto& a : job.ranks) {
      std::optional<trace::AllocatorReplay> r = trace::replay_allocator(trace_of(a), a);
      if (json) {
        nlohmann::json j = r ? trace::replay_to_json(*r) : nlohmann::json(nullptr);
        out["allocator_replay"].push_back({{"file", a.file}, {"replay", j}});
      } else {
        text += fmt::format("\n{}:\n", a.file);
        text += r ? trace::replay_to_text(*r) : "allocator replay: no [memory] events with Addr and Bytes in the analysed steps "
                                                 "(record with profile_memory=True)\n";
      }
    }
  }
  if (vm.count("idle")) {
    if (json) out["idle"] = nlohmann::json::array();
    for (const auto& a : job.ranks) {
      std::optional<IdleAttribution> r = trace::attribute_idle(trace_of(a), a);
      if (json) {
        out["idle"].push_back({{"file", a.file}, {"idle", r ? idle_to_json(*r) : nlohmann::json(nullptr)}});
      } else {
        text += fmt::format("\n{}:\n", a.file);
        text += r ? idle_to_text(*r, top_rows(top))
                  : "idle attribution: none (no analysed step, or a stepsim trace: its idle is the model's own)\n";
      }
    }
  }
  if (json) std::cout << out.dump(2) << "\n";
  else std::cout << text;
  return 0;
}

}  // namespace stepsim::cli
