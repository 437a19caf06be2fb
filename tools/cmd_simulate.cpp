// stepsim simulate EXP.json [--set path=value]... [--json] [--trace F] [--report F.html] [--idle]
#include <fstream>
#include <iostream>


#include <algorithm>

#include <fmt/format.h>

#include "sim/analysis/idle.hpp"
#include "sim/analysis/metrics.hpp"
#include "sim/exec/engine.hpp"
#include "sim/analysis/run.hpp"
#include "sim/core/error.hpp"
#include "sim/core/format.hpp"
#include "sim/report/chrome_trace.hpp"
#include "sim/report/result_json.hpp"
#include "sim/report/text_report.hpp"
#include "sim/strategies/load_experiment.hpp"
#include "tools/cli_common.hpp"
#include "tools/report_hook.hpp"

namespace stepsim::cli {

namespace {

constexpr std::int64_t kMaxSamples = 10000;

// The step over `samples` runs in which each collective waits for one draw of its slowest rank
// (RankOptions::sample) instead of the expected wait: p50, p90, p99 (nearest rank).
nlohmann::json sample_steps(const Experiment& e, const SimulationResult& r, std::int64_t samples, std::uint64_t seed) {
  std::vector<std::int64_t> steps;
  steps.reserve(static_cast<std::size_t>(samples));
  for (std::int64_t i = 0; i < samples; ++i) {
    const Timeline t = simulate_program(r.program, e.cluster.profile, e.training.allocator,
                                        RankOptions{true, seed + static_cast<std::uint64_t>(i)}, TimelineDetail::Metrics);
    steps.push_back(compute_metrics(t).overlap.step_time.ns);
  }
  std::sort(steps.begin(), steps.end());
  auto pct = [&](double p) {
    const auto k = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(steps.size())));
    return steps[std::max<std::size_t>(k, 1) - 1];
  };
  return {{"samples", samples},  {"seed", seed},          {"p50_ns", pct(50)}, {"p90_ns", pct(90)},
          {"p99_ns", pct(99)},   {"min_ns", steps.front()}, {"max_ns", steps.back()},
          {"expected_ns", r.metrics.overlap.step_time.ns}};
}

}  // namespace

int simulate(const Args& args) {
  po::options_description opts("simulate options");
  std::string exp_file, trace_file, report_file, json_file;
  std::vector<std::string> sets;
  int top = 10;
  std::int64_t samples = 0;
  std::uint64_t seed = 0;
  opts.add_options()("experiment", po::value(&exp_file)->required(), "experiment JSON")(
      "set", po::value(&sets)->composing(), "override a config value: path=value (repeatable), e.g. strategy.bucket_cap_mb=50")(
      "json", "print the result as JSON (schema stepsim.result/1) instead of the text report")(
      "json-out", po::value(&json_file), "also write the JSON result to this file")(
      "trace", po::value(&trace_file), "write a Chrome/Perfetto trace JSON to this file")(
      "report", po::value(&report_file), "write a self-contained HTML report to this file")(
      "idle", "also attribute the GPU's idle time: each gap between GPU ops charged to what the host did before the next "
              "one (the same rules as analyze --idle; docs/analyze.md)")(
      "top", po::value(&top)->default_value(10), "with --idle: how many idle causes to list")(
      "samples", po::value(&samples), "also run the step K times, each collective waiting for one random draw of its slowest rank "
                                      "(the profile's rank_variation) instead of the expected wait: step time p50/p90/p99 (docs/scale.md)")(
      "seed", po::value(&seed)->default_value(0), "with --samples: the first run's random seed (run i uses seed + i)");
  po::positional_options_description pos;
  pos.add("experiment", 1);
  po::variables_map vm;
  if (!parse_args(args, "usage: stepsim simulate EXP.json [--set path=value]... [--json] [--trace F] [--report F.html] [--idle]", opts,
                  pos, vm))
    return 0;
  const std::size_t rows = top_rows(top);
  if (vm.count("samples") && (samples < 1 || samples > kMaxSamples))
    throw InputError(fmt::format("simulate: --samples {}: expected an integer from 1 to {}", samples, kMaxSamples));
  if (vm.count("seed") && !vm["seed"].defaulted() && !vm.count("samples"))
    throw InputError("simulate: --seed applies to --samples only");
  Experiment e = load_experiment(exp_file, sets);
  if (samples > 0 && !e.cluster.profile->rank_variation.enabled())
    throw InputError(fmt::format("simulate: --samples {}: the profile {} declares no rank_variation, so every sample would be the "
                                 "expected step (fit it with stepsim fit --trace of several ranks; docs/scale.md)",
                                 samples, e.cluster.profile->name));
  SimulationResult r = run_experiment(e);
  const nlohmann::json sampled = samples > 0 ? sample_steps(e, r, samples, seed) : nlohmann::json();
  // Every output is written in full to its temporary file before any is renamed into place.
  std::vector<OutputFile> outs;
  if (!trace_file.empty()) {
    outs.push_back(open_output(trace_file, "trace file"));
    write_chrome_trace(outs.back().stream(), r.timeline, exp_file, &r.program);
  }
  if (!report_file.empty()) {
    outs.push_back(open_output(report_file, "HTML report"));
    write_html_report_hook(outs.back().stream(), e, r);
  }
  if (!json_file.empty()) {
    outs.push_back(open_output(json_file, "JSON file"));
    write_result_json(outs.back().stream(), e, r);
    outs.back() << "\n";
  }
  for (auto& o : outs) o.commit();
  const bool idle = vm.count("idle") > 0;
  if (vm.count("json")) {
    nlohmann::json extra = nlohmann::json::object();
    if (idle) extra["idle"] = idle_to_json(attribute_idle(r.timeline));
    if (!sampled.is_null()) extra["step_time_samples"] = sampled;
    write_result_json(std::cout, e, r, extra);
    std::cout << "\n";
  } else {
    write_text_report(std::cout, e, r);
    if (idle) std::cout << "\n" << idle_to_text(attribute_idle(r.timeline), rows);
    if (!sampled.is_null())
      std::cout << fmt::format("\n  step time over {} samples of the slowest ranks (seed {}): p50 {}  p90 {}  p99 {}  "
                               "(min {}, max {}; expected-value step {})\n",
                               samples, seed, format_time(Time{sampled["p50_ns"].get<std::int64_t>()}),
                               format_time(Time{sampled["p90_ns"].get<std::int64_t>()}),
                               format_time(Time{sampled["p99_ns"].get<std::int64_t>()}),
                               format_time(Time{sampled["min_ns"].get<std::int64_t>()}),
                               format_time(Time{sampled["max_ns"].get<std::int64_t>()}), format_time(r.metrics.overlap.step_time));
  }
  return 0;
}

}  // namespace stepsim::cli
