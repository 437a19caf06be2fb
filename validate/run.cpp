// Running a suite: predict each case in process, measure it (trace through analyze's code, or
// the published numbers converted), compare, summarise, gate.
#include <algorithm>
#include <cmath>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "calibrate/fit/profile_fit.hpp"
#include "sim/strategies/load_experiment.hpp"
#include "sim/core/stats.hpp"
#include "sim/strategies/strategy.hpp"
#include "trace/allocator_replay.hpp"
#include "trace/kineto_trace.hpp"
#include "trace/trace_analysis.hpp"
#include "calibrate/from_trace/trace_fit.hpp"
#include "sim/analysis/class_breakdown.hpp"
#include "sim/analysis/run.hpp"
#include "sim/analysis/throughput.hpp"
#include "sim/core/error.hpp"
#include "sim/hardware/profile_cache.hpp"
#include "validate/validate.hpp"

namespace stepsim::validate {

namespace fs = std::filesystem;

int Report::failed_rows() const {
  return static_cast<int>(std::count_if(rows.begin(), rows.end(), [](const Row& r) { return !r.pass; }));
}

bool Report::pass() const { return failed_rows() == 0 && baseline.empty(); }

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// Every metric a Metrics value carries. Peak memory only where it was measured (a trace without
// memory samples reports 0; traces before PyTorch recorded "Total Reserved" have no reserved).
std::map<Metric, double> metric_values(const Metrics& m) {
  std::map<Metric, double> v;
  v[Metric::StepTime] = static_cast<double>(m.overlap.step_time.ns);
  v[Metric::Forward] = static_cast<double>(m.forward.ns);
  v[Metric::Backward] = static_cast<double>(m.backward.ns);
  v[Metric::Optimizer] = static_cast<double>(m.optimizer.ns);
  v[Metric::Compute] = static_cast<double>(m.overlap.compute_time.ns);
  v[Metric::Comm] = static_cast<double>(m.overlap.comm_time.ns);
  v[Metric::ExposedComm] = static_cast<double>(m.overlap.exposed_comm.ns);
  v[Metric::OverlapPct] = m.overlap.overlap_pct;
  if (m.peak_memory.count > 0) v[Metric::PeakAllocated] = static_cast<double>(m.peak_memory.count);
  if (m.peak_reserved.count > 0) v[Metric::PeakReserved] = static_cast<double>(m.peak_reserved.count);
  return v;
}

struct TraceKey {
  std::vector<std::string> files;
  std::string steps;
  auto operator<=>(const TraceKey&) const = default;
};

// What a trace measures over its steps, and its own allocator events replayed through the
// caching-allocator model (analyze --allocator-replay; empty without profile_memory events).
struct TraceMeasurement {
  Metrics metrics;
  double kernels = 0;  // compute kernels per step, mean over the steps (analyze's class breakdown)
  std::optional<trace::AllocatorReplay> replay;
};

class Measurements {
 public:
  const TraceMeasurement& trace_measurement(const fs::path& file, const std::string& steps) {
    TraceKey key{{file.string()}, steps};
    auto it = metrics_.find(key);
    if (it != metrics_.end()) return it->second;
    trace::AnalyzeOptions o;
    if (!steps.empty()) trace::parse_step_range(steps, o);
    trace::TraceAnalysis a = trace::analyze_trace(trace_of(file), o);
    if (a.steps.empty()) throw InputError(fmt::format("{}: no ProfilerStep in the range \"{}\"", file.string(), steps));
    double kernels = 0;
    for (const auto& st : a.steps) kernels += static_cast<double>(st.classes.kernels());
    TraceMeasurement m{a.mean, kernels / static_cast<double>(a.steps.size()), trace::replay_allocator(trace_of(file), a)};
    return metrics_.emplace(key, std::move(m)).first->second;
  }

  // What `stepsim fit --trace` takes from these traces (read once, fitted once per options).
  const trace::TraceCalibration& trace_fit(const std::vector<fs::path>& files, const std::string& steps,
                                           bool assumed_groups, int gpus_per_node) {
    TraceKey key{{}, steps + "@" + std::to_string(gpus_per_node) + (assumed_groups ? "+assumed" : "")};
    for (const auto& f : files) key.files.push_back(f.string());
    auto it = fits_.find(key);
    if (it != fits_.end()) return it->second;
    std::vector<trace::KinetoTrace> traces;
    for (const auto& f : files) traces.push_back(trace_of(f));
    trace::AnalyzeOptions o;
    if (!steps.empty()) trace::parse_step_range(steps, o);
    trace::TraceCalibration c =
        trace::trace_calibration(traces, key.files, o, trace::TraceFitOptions{assumed_groups, 0, false, gpus_per_node});
    return fits_.emplace(key, std::move(c)).first->second;
  }

 private:
  const trace::KinetoTrace& trace_of(const fs::path& file) {
    auto it = traces_.find(file.string());
    if (it == traces_.end()) it = traces_.emplace(file.string(), trace::read_kineto_trace(file)).first;
    return it->second;
  }
  std::map<std::string, trace::KinetoTrace> traces_;
  std::map<TraceKey, TraceMeasurement> metrics_;
  std::map<TraceKey, trace::TraceCalibration> fits_;
};

std::string fmt_number(double v) { return fmt::format("{:.6g}", v); }

// The published numbers of `c` as metric values, given the experiment that describes the run.
std::map<Metric, double> published_values(const Case& c, const Experiment& e, std::vector<std::string>& conversions) {
  const Case::Published& p = *c.published;
  std::map<Metric, double> v;
  const double local_tokens = static_cast<double>(e.workload->tokens()) * e.training.grad_accum;
  const double global_tokens = local_tokens * e.cluster.world_size();
  if (p.step_time_s) v[Metric::StepTime] = *p.step_time_s * 1e9;
  if (p.tokens_per_s) {
    if (std::fabs(*p.global_batch_tokens - global_tokens) > 0.5)
      throw InputError(fmt::format(
          "{}: {}/measured/published/global_batch_tokens: {}: expected the experiment's tokens per optimizer step "
          "({} = micro_batch {} x seq {} x grad_accum {} x {} GPUs): the experiment does not describe the published run",
          c.file, c.json_path, fmt_number(*p.global_batch_tokens), fmt_number(global_tokens), e.workload->micro_batch,
          e.workload->seq_len, e.training.grad_accum, e.cluster.world_size()));
    v[Metric::StepTime] = *p.global_batch_tokens / *p.tokens_per_s * 1e9;
    conversions.push_back(fmt::format("step time = global batch {} tokens / {} tokens/s = {:.4f} s",
                                      fmt_number(*p.global_batch_tokens), fmt_number(*p.tokens_per_s),
                                      *p.global_batch_tokens / *p.tokens_per_s));
  }
  if (p.tokens_per_s_per_gpu_lo) {
    double wps = (*p.tokens_per_s_per_gpu_lo + *p.tokens_per_s_per_gpu_hi) / 2;
    v[Metric::StepTime] = local_tokens / wps * 1e9;
    std::string range = *p.tokens_per_s_per_gpu_lo == *p.tokens_per_s_per_gpu_hi
                            ? fmt_number(wps)
                            : fmt::format("{}-{} (midpoint {})", fmt_number(*p.tokens_per_s_per_gpu_lo),
                                          fmt_number(*p.tokens_per_s_per_gpu_hi), fmt_number(wps));
    conversions.push_back(fmt::format("step time = {} tokens per GPU per step / {} tokens/s per GPU = {:.4f} s",
                                      fmt_number(local_tokens), range, local_tokens / wps));
  }
  if (p.peak_allocated_gib) v[Metric::PeakAllocated] = *p.peak_allocated_gib * kGiB;
  if (p.peak_reserved_gib) v[Metric::PeakReserved] = *p.peak_reserved_gib * kGiB;
  if (p.peak_active_pct) {
    v[Metric::PeakAllocated] = *p.peak_active_pct / 100 * *p.memory_capacity_gib * kGiB;
    conversions.push_back(fmt::format("peak allocated = peak active {}% of {} GiB = {:.2f} GiB (active bytes: allocated "
                                      "blocks, including those held for another stream by record_stream)",
                                      fmt_number(*p.peak_active_pct), fmt_number(*p.memory_capacity_gib),
                                      *p.peak_active_pct / 100 * *p.memory_capacity_gib));
  }
  if (p.peak_reserved_pct) {
    v[Metric::PeakReserved] = *p.peak_reserved_pct / 100 * *p.memory_capacity_gib * kGiB;
    conversions.push_back(fmt::format("peak reserved = {}% of {} GiB = {:.2f} GiB", fmt_number(*p.peak_reserved_pct),
                                      fmt_number(*p.memory_capacity_gib),
                                      *p.peak_reserved_pct / 100 * *p.memory_capacity_gib));
  }
  return v;
}

double error_of(Metric m, double predicted, double measured) {
  if (in_points(m)) return predicted - measured;
  return 100.0 * (predicted - measured) / measured;
}

// Nearest-rank percentile of sorted values.
double percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  std::size_t rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(sorted.size())));
  return sorted[std::clamp<std::size_t>(rank, 1, sorted.size()) - 1];
}

// Per split (test first: the accuracy claims), then per source and "all", then per metric.
std::vector<Summary> summarise(const std::vector<Row>& rows) {
  std::map<std::tuple<Split, std::string, Metric>, std::vector<double>> errors;
  std::vector<std::string> sources;
  for (const auto& r : rows) {
    if (std::find(sources.begin(), sources.end(), r.source) == sources.end()) sources.push_back(r.source);
    errors[{r.split, r.source, r.metric}].push_back(r.error);
    errors[{r.split, "all", r.metric}].push_back(r.error);
  }
  sources.push_back("all");
  std::vector<Summary> out;
  for (Split split : {Split::Test, Split::Fit})
    for (const auto& source : sources)
      for (Metric m : kAllMetrics) {
        auto it = errors.find({split, source, m});
        if (it == errors.end()) continue;
        Summary s;
        s.split = split;
        s.source = source;
        s.metric = m;
        s.cases = static_cast<int>(it->second.size());
        std::vector<double> abs;
        double sum = 0;
        for (double e : it->second) {
          abs.push_back(std::fabs(e));
          sum += e;
        }
        std::sort(abs.begin(), abs.end());
        s.median_abs = median(abs);
        s.p90_abs = percentile(abs, 0.9);
        s.bias = sum / static_cast<double>(it->second.size());
        out.push_back(s);
      }
  return out;
}

// The case's value of every facet (facet_names()), from the experiment as it runs.
std::map<std::string, std::string> case_facets(const Experiment& e) {
  std::string framework = e.strategy->framework();
  if (framework == "zero") framework += std::to_string(e.strategy->effective_config().value("stage", 0));
  const Workload& w = *e.workload;
  return {{"gpus", std::to_string(e.cluster.world_size())},
          {"nodes", std::to_string(e.cluster.nodes)},
          {"gpus_per_node", std::to_string(e.cluster.gpus_per_node)},
          {"model", w.toy ? std::string("toy") : w.name},
          {"implementation", w.options ? to_string(w.options->impl) : std::string("toy")},
          {"attention", w.options ? to_string(w.options->attention) : std::string("toy")},
          {"framework", framework},
          {"checkpointing", to_string(w.checkpointing())},
          {"compile", w.options && w.options->compile ? "on" : "off"},
          {"seq_len", std::to_string(w.seq_len)},
          {"micro_batch", std::to_string(w.micro_batch)},
          {"grad_accum", std::to_string(e.training.grad_accum)},
          {"profile", e.cluster.profile->name}};
}

// A case calibrated on its own traces: the profile refitted from them (fit --trace), and the
// traces named in the case's info.
void calibrate_from_traces(const Case& c, Experiment& e, Measurements& measurements, CaseInfo& info) {
  const auto& fit = measurements.trace_fit(c.calibration_traces, c.calibration_steps, c.calibration_assumed_groups,
                                           e.cluster.gpus_per_node);
  calib::FitReport fit_report;
  calib::FitOptions fo;
  fo.command = "stepsim validate (fit --trace)";
  e.cluster.profile = trace::refit_from_traces(e.cluster.profile, fit, fo, fit_report);
  for (const auto& f : c.calibration_traces) {
    info.calibrated_from += (info.calibrated_from.empty() ? "" : ", ") + f.filename().string();
  }
  if (!c.calibration_steps.empty()) info.calibrated_from += " steps " + c.calibration_steps;
}

// The case's measurements: from its trace (analyze, mean over the steps) or as published.
std::map<Metric, double> measured_values(const Case& c, const Experiment& e, Measurements& measurements, CaseInfo& info) {
  std::map<Metric, double> measured;
  if (c.trace) {
    const TraceMeasurement& tm = measurements.trace_measurement(*c.trace, c.trace_steps);
    measured = metric_values(tm.metrics);
    if (tm.kernels > 0) measured[Metric::Kernels] = tm.kernels;
    info.measured_by = "trace " + c.trace->filename().string() +
                       (c.trace_steps.empty() ? "" : ", ProfilerSteps " + c.trace_steps) + " (analyze, mean)";
    if (tm.replay && tm.replay->trace_reserved_peak.count > 0) {
      // How much of the trace's reserved its own steps' allocation events reserve when each block
      // is freed at its free event: the rest was reserved before the window or held past a free
      // (a collective's recordStream before PyTorch 2.8, docs/memory.md).
      const trace::AllocatorReplay& r = *tm.replay;
      info.conversions.push_back(fmt::format(
          "peak reserved: the trace reports {:.2f} GiB ({:.2f} GiB at the window's first event); its own {} "
          "allocations in the window, replayed through the caching-allocator model (analyze --allocator-replay), "
          "reserve {:.2f} GiB",
          static_cast<double>(r.trace_reserved_peak.count) / kGiB, static_cast<double>(r.trace_reserved_start.count) / kGiB,
          r.allocations, static_cast<double>(r.replay_reserved_peak.count) / kGiB));
    }
  } else {
    measured = published_values(c, e, info.conversions);
    info.measured_by = "published";
  }
  return measured;
}

// One row per compared metric (the case's, else every measured one), with its error and tolerance;
// a metric measured but not predicted is noted in the case's conversions.
void add_rows(const Suite& suite, const Case& c, const std::map<Metric, double>& predicted,
              const std::map<Metric, double>& measured, CaseInfo& info, std::vector<Row>& rows) {
  std::vector<Metric> metrics = c.metrics;
  if (metrics.empty())
    for (const auto& [m, value] : measured) metrics.push_back(m);
  for (Metric m : metrics) {
    auto meas = measured.find(m);
    if (meas == measured.end())
      throw InputError(fmt::format("{}: {}/metrics: {}: expected a metric the case measures", c.file, c.json_path,
                                   to_string(m)));
    auto pred = predicted.find(m);
    if (pred == predicted.end()) {
      info.conversions.push_back(fmt::format("{} measured ({:.2f} {}) but not predicted by this build: not compared",
                                             to_string(m), display_value(m, meas->second), unit_of(m)));
      continue;
    }
    if (!in_points(m) && meas->second <= 0)
      throw InputError(fmt::format("{}: {}: measured {} is {}: expected a positive measurement", c.file, c.json_path,
                                   to_string(m), meas->second));
    Row r;
    r.case_name = c.name;
    r.source = c.source;
    r.split = c.split;
    r.metric = m;
    r.predicted = pred->second;
    r.measured = meas->second;
    r.error = error_of(m, r.predicted, r.measured);
    if (auto own = c.tolerance_pct.find(m); own != c.tolerance_pct.end()) r.tolerance = own->second;
    else if (auto def = suite.tolerance_pct.find(m); def != suite.tolerance_pct.end()) r.tolerance = def->second;
    if (r.tolerance) r.pass = std::fabs(r.error) <= *r.tolerance;
    rows.push_back(r);
  }
}

// Predicted tokens/s, MFU and HFU, and the measured ones from the measured step time.
void set_throughput(const Experiment& e, const SimulationResult& sim, const std::map<Metric, double>& measured, CaseInfo& info) {
  const Throughput tp = throughput(e, sim.metrics.overlap.step_time);
  info.throughput.tokens_per_step = tp.tokens_per_step;
  info.throughput.predicted_tokens_per_s = tp.tokens_per_s;
  info.throughput.predicted_mfu_pct = tp.mfu_pct;
  info.throughput.predicted_hfu_pct = tp.hfu_pct;
  if (auto ms = measured.find(Metric::StepTime); ms != measured.end() && ms->second > 0) {
    info.throughput.measured_tokens_per_s = tp.tokens_per_step * 1e9 / ms->second;
    if (tp.mfu_pct > 0) info.throughput.measured_mfu_pct = tp.mfu_pct * static_cast<double>(sim.metrics.overlap.step_time.ns) / ms->second;
  }
}

// The predicted peaks against the GPU's memory (the run fit there: CapacityCheck).
CaseMemory case_memory(const Metrics& m) {
  CaseMemory out;
  if (m.capacity.count <= 0) return out;
  const double cap = static_cast<double>(m.capacity.count), outside = static_cast<double>(m.non_pytorch.count);
  out.allocated_of_capacity = (static_cast<double>(m.peak_memory.count) + outside) / cap;
  out.reserved_of_capacity = (static_cast<double>(std::max(m.peak_reserved.count, m.peak_memory.count)) + outside) / cap;
  out.fits_allocated = m.fits_allocated;
  out.fits = m.fits;
  out.alloc_retries = m.alloc_retries;
  out.alloc_ooms = m.alloc_ooms;
  return out;
}

std::vector<CapacityCheck> capacity_checks(const std::vector<CaseInfo>& cases) {
  std::vector<CapacityCheck> out;
  auto row = [&](const std::string& source) -> CapacityCheck& {
    for (auto& c : out)
      if (c.source == source) return c;
    out.push_back(CapacityCheck{source});
    return out.back();
  };
  for (const auto& c : cases) {
    if (c.memory.allocated_of_capacity <= 0) continue;
    for (const std::string& source : {c.source, std::string("all")}) {
      CapacityCheck& k = row(source);
      ++k.cases;
      if (!c.memory.fits_allocated) ++k.allocated_over;
      else if (c.memory.alloc_ooms > 0) ++k.at_risk;
      else if (!c.memory.fits) ++k.flushes;
    }
  }
  // "all" last, as in the summaries.
  std::stable_partition(out.begin(), out.end(), [](const CapacityCheck& c) { return c.source != "all"; });
  return out;
}

// The suite's pairs: predicted and measured change of step time from the first case to the second.
std::vector<PairRow> pair_rows(const Suite& suite, const std::map<std::string, std::pair<double, double>>& step_times) {
  std::vector<PairRow> pairs;
  for (const auto& p : suite.pairs) {
    auto a = step_times.find(p.first), b = step_times.find(p.second);
    if (a == step_times.end() || b == step_times.end())
      throw InputError(fmt::format("{}: pair \"{}\": both cases must measure step_time", suite.file, p.name));
    PairRow row{p.name, p.first, p.second, p.knob, 0, 0, std::nullopt};
    row.predicted_change_pct = 100.0 * (b->second.first - a->second.first) / a->second.first;
    row.measured_change_pct = 100.0 * (b->second.second - a->second.second) / a->second.second;
    if (std::fabs(row.measured_change_pct) >= 2.0)
      row.sign_right = (row.predicted_change_pct > 0) == (row.measured_change_pct > 0);
    pairs.push_back(row);
  }
  return pairs;
}

}  // namespace

namespace {

Report run_cases(const Suite& suite, bool fit_split_only, const std::function<void(HardwareProfile&)>& adjust) {
  Report report;
  report.suite_file = suite.file;
  ProfileCache profiles;
  Measurements measurements;
  std::map<std::string, std::pair<double, double>> step_times;  // case -> (predicted, measured)

  for (const Case& c : suite.cases) {
    if (fit_split_only && c.split != Split::Fit) continue;
    const SuiteDocument& d = suite.docs[c.doc];
    const std::string experiment_path = c.json_path + "/experiment";
    Experiment e = experiment_from_json(d.doc.at(nlohmann::json::json_pointer(experiment_path)), d.sources, &profiles,
                                        experiment_path);
    CaseInfo info{c.name, c.source, c.description, c.provenance, c.assumptions, {}, {}, {}, {}, {}};
    if (!c.calibration_traces.empty()) calibrate_from_traces(c, e, measurements, info);
    if (adjust) adjust(e.cluster.profile.edit());
    SimulationResult sim = run_experiment(e);
    std::map<Metric, double> predicted = metric_values(sim.metrics);
    predicted[Metric::Kernels] = static_cast<double>(
        class_breakdown(sim.timeline, sim.metrics.overlap.comm_time, sim.metrics.overlap.idle).kernels());
    std::map<Metric, double> measured = measured_values(c, e, measurements, info);
    add_rows(suite, c, predicted, measured, info, report.rows);
    if (predicted.count(Metric::StepTime) && measured.count(Metric::StepTime))
      step_times[c.name] = {predicted[Metric::StepTime], measured[Metric::StepTime]};
    set_throughput(e, sim, measured, info);
    info.memory = case_memory(sim.metrics);
    info.facets = case_facets(e);
    report.cases.push_back(std::move(info));
  }

  report.summaries = summarise(report.rows);
  report.capacity = capacity_checks(report.cases);
  if (!fit_split_only) report.pairs = pair_rows(suite, step_times);
  return report;
}

}  // namespace

Report run_suite(const Suite& suite) { return run_cases(suite, false, {}); }

Report run_fit_split(const Suite& suite, const std::function<void(HardwareProfile&)>& adjust) {
  return run_cases(suite, true, adjust);
}

ClockFit fit_clock(const Suite& suite, const std::string& profile_name, const ClockProfile& clock) {
  ClockFit out;
  out.profile = profile_name;
  // The median signed step-time error of the fit rows on the profile, with full_load_MHz = f
  // (f <= 0: the profile as loaded).
  auto median_error = [&](double f, int* rows) {
    Report r = run_fit_split(suite, [&](HardwareProfile& p) {
      if (p.name != profile_name || f <= 0) return;
      p.compute.clock = clock;
      p.compute.clock.full_load_mhz = f;
    });
    std::map<std::string, const CaseInfo*> cases;
    for (const auto& c : r.cases) cases[c.name] = &c;
    std::vector<double> errors;
    for (const auto& row : r.rows)
      if (row.metric == Metric::StepTime && cases.at(row.case_name)->facets.at("profile") == profile_name)
        errors.push_back(row.error);
    if (rows) *rows = static_cast<int>(errors.size());
    std::sort(errors.begin(), errors.end());
    return errors.empty() ? 0.0 : median(errors);
  };
  out.median_error_before = median_error(0, &out.rows);
  if (out.rows == 0)
    throw InputError(fmt::format("fit --suite {}: no fit-split case with a step time runs on profile \"{}\"", suite.file,
                                 profile_name));
  // A lower clock only lengthens GEMMs and attention: the error falls as f rises. Bisect on
  // [boost / 4, boost] to 1 MHz.
  double lo = clock.boost_mhz / 4, hi = clock.boost_mhz;
  if (median_error(hi, nullptr) >= 0) {
    out.full_load_mhz = hi;
    out.note = "already too slow at the boost clock: no power-limited clock is visible in these rows";
  } else if (median_error(lo, nullptr) <= 0) {
    out.full_load_mhz = lo;
    out.note = "still too fast at a quarter of the boost clock: the clock does not explain these rows";
  } else {
    while (hi - lo > 1) {
      double mid = (lo + hi) / 2;
      (median_error(mid, nullptr) > 0 ? lo : hi) = mid;
    }
    out.full_load_mhz = std::round((lo + hi) / 2);
  }
  out.median_error_after = median_error(out.full_load_mhz, nullptr);
  return out;
}

const std::vector<std::string>& facet_names() {
  static const std::vector<std::string> names{"gpus",      "nodes",         "gpus_per_node", "model",   "implementation",
                                              "attention", "framework",     "checkpointing", "compile", "seq_len",
                                              "micro_batch", "grad_accum",  "profile"};
  return names;
}

void check_facets(const std::vector<std::string>& facets) {
  const auto& names = facet_names();
  for (const auto& facet : facets)
    if (std::find(names.begin(), names.end(), facet) == names.end())
      throw InputError(fmt::format("--by: \"{}\": expected one of {}", facet, fmt::join(names, ", ")));
}

std::vector<GroupSummary> group_summaries(const Report& r, const std::vector<std::string>& facets, Metric metric) {
  check_facets(facets);
  std::map<std::string, const CaseInfo*> cases;
  for (const auto& c : r.cases) cases[c.name] = &c;
  std::vector<GroupSummary> out;
  for (const auto& facet : facets) {
    std::map<std::string, std::vector<Row>> rows;  // value -> its rows of `metric`
    for (const auto& row : r.rows) {
      auto c = cases.find(row.case_name);
      if (row.metric == metric && c != cases.end()) rows[c->second->facets.at(facet)].push_back(row);
    }
    std::vector<std::string> values;
    for (const auto& [value, ignored] : rows) values.push_back(value);
    auto number = [](const std::string& v) {
      return !v.empty() && std::all_of(v.begin(), v.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
    };
    if (std::all_of(values.begin(), values.end(), number))
      std::sort(values.begin(), values.end(), [](const std::string& a, const std::string& b) { return std::stoll(a) < std::stoll(b); });
    for (const auto& value : values)
      for (const Summary& s : summarise(rows[value])) out.push_back(GroupSummary{facet, value, s});
  }
  return out;
}

}  // namespace stepsim::validate
