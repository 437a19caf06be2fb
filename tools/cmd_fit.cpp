// `stepsim fit`: build a hardware profile from measurements users already have: nccl-tests
// logs, XLA's collective and GEMM tables, and `stepsim calibrate` output. The fitting is plain
// C++ in calibrate/fit; this file only reads options, imports, and writes the profile.
#include <algorithm>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <tuple>

#include <fmt/format.h>

#include "calibrate/calibration_io.hpp"
#include "calibrate/fit/profile_fit.hpp"
#include "calibrate/importers/azure_results.hpp"
#include "calibrate/importers/nccl_tests_log.hpp"
#include "calibrate/text_util.hpp"
#include "calibrate/importers/xla_tables.hpp"
#include "trace/kineto_trace.hpp"
#include "trace/trace_analysis.hpp"
#include "calibrate/from_trace/rank_variation.hpp"
#include "calibrate/from_trace/trace_fit.hpp"
#include "sim/core/error.hpp"
#include "sim/core/format.hpp"
#include "sim/hardware/profile.hpp"
#include "tools/cli_common.hpp"
#include "validate/validate.hpp"

namespace stepsim::cli {

namespace {

// "LOG" or "LOG@2" or "LOG@1,3": keep only those runs (1-based, in file order).
std::vector<calib::CollectiveSeries> import_log_spec(const std::string& spec, std::vector<std::string>& files) {
  std::string path = spec;
  std::vector<int> runs;
  auto at = spec.rfind('@');
  if (at != std::string::npos && at + 1 < spec.size() && std::isdigit(static_cast<unsigned char>(spec[at + 1]))) {
    path = spec.substr(0, at);
    for (const auto& r : calib::split_char(spec.substr(at + 1), ',')) {
      auto v = calib::parse_int(r);
      if (!v || *v < 1) throw InputError(fmt::format("fit: --nccl-tests {}: '{}' is not a run number >= 1", spec, r));
      runs.push_back(static_cast<int>(*v));
    }
  }
  files.push_back(spec);
  auto all = calib::import_collective_log(path);
  if (runs.empty()) return all;
  std::vector<calib::CollectiveSeries> out;
  for (int r : runs) {
    if (r > static_cast<int>(all.size()))
      throw InputError(fmt::format("fit: --nccl-tests {}: the file holds {} runs", spec, all.size()));
    out.push_back(all[static_cast<std::size_t>(r - 1)]);
  }
  return out;
}

// The fitted topology levels and the group sizes they were fitted over.
void print_topology_summary(std::ostream& log, const calib::TopologyFitReport& t) {
  log << fmt::format("{:<20} {:>12} {:>14} {:>7} {:>12} {:>10}\n", "level", "GB/s", "latency_scale", "points",
                     "median_err", "max_err");
  for (const auto& l : t.levels) {
    if (!l.fitted) {
      log << fmt::format("{:<20} {}\n", l.level, l.note);
      continue;
    }
    log << fmt::format("{:<20} {:>12.2f} {:>14} {:>7} {:>11.2f}% {:>9.2f}%\n", l.level, l.bandwidth_gbps,
                       l.latency_scale >= 0 ? fmt::format("{:.3f}", l.latency_scale) : std::string("-"), l.points,
                       100 * l.median_abs_error, 100 * l.max_abs_error);
    if (l.local_gbps >= 0)
      log << fmt::format("{:<20} local pass {:.2f} GB/s{}\n", "", l.local_gbps, l.local_gbps > 0 ? "" : " (not separable: none)");
    if (l.measured_bandwidth_gbps > 0)
      log << fmt::format("{:<20} {:.2f} GB/s on the measured GPUs, scaled to the profile's NVLink\n", "",
                         l.measured_bandwidth_gbps);
    if (!l.note.empty()) log << fmt::format("{:<20} {}\n", "", l.note);
  }
  const auto& r = t.range;
  log << fmt::format("fitted group sizes: {}-{} ranks, {}-{} nodes, {}-{} GPUs per node\n", r.min_ranks, r.max_ranks,
                     r.min_nodes, r.max_nodes, r.min_gpus_per_node, r.max_gpus_per_node);
}

// One line per fitted size range (and ring fit), then the topology levels.
void print_fit_summary(std::ostream& log, const calib::FitReport& report) {
  if (!report.fits.empty())
    log << fmt::format("{:<11} {:<15} {:>5} {:>5} {:>13} {:>13} {:>10} {:>10} {:>8} {:>8} {:>6}\n", "scope", "collective",
                     "ranks", "nodes", "min_bytes", "max_bytes", "alpha_us", "beta_GBps", "R^2", "max_err", "points");
  for (const auto& f : report.fits) {
    for (const auto& r : f.ranges) {
      if (f.derived_from)
        log << fmt::format("{:<11} {:<15} {:>5} {:>5} {:>13.0f} {:>13.0f} {:>10.3f} {:>10.2f} {:>8} {:>8} {:>6}\n", f.scope,
                           to_string(f.kind), f.ranks, f.nodes, r.min_bytes, r.max_bytes, r.alpha_us, r.beta_gbps(),
                           "derived", "-", "-");
      else
        log << fmt::format("{:<11} {:<15} {:>5} {:>5} {:>13.0f} {:>13.0f} {:>10.3f} {:>10.2f} {:>8.5f} {:>7.2f}% {:>6}{}\n",
                           f.scope, to_string(f.kind), f.ranks, f.nodes, r.min_bytes, r.max_bytes, r.alpha_us,
                           r.beta_gbps(), r.r2, 100 * r.max_rel_error, r.points, f.in_profile ? "" : "  (report only)");
    }
  }
  for (const auto& r : report.ring_fits)
    log << fmt::format("ring fit {} {} over group sizes {}: base {:.2f} us, step {:.3f} us, busbw {:.1f} GB/s, R^2 {:.4f}, "
                       "max_err {:.1f}%\n",
                       r.scope, to_string(r.kind), fmt::join(r.group_sizes, ","), r.base_latency_us, r.step_latency_us,
                       r.busbw_gbps, r.r2, 100 * r.max_rel_error);
  if (report.topology) print_topology_summary(log, *report.topology);
}

// The measurement files given on the command line, imported into `in`.
void import_measurements(const std::vector<std::string>& logs, const std::vector<std::string>& xla_coll,
                         const std::vector<std::string>& xla_gemm, const std::vector<std::string>& azure_gemm,
                         const std::vector<std::string>& calibrations, const std::string& device_key,
                         calib::FitInputs& in) {
  for (const auto& l : logs) {
    auto series = import_log_spec(l, in.files);
    in.collectives.insert(in.collectives.end(), series.begin(), series.end());
  }
  for (const auto& f : xla_coll) {
    auto series = calib::import_xla_collectives(f, device_key);
    in.collectives.insert(in.collectives.end(), series.begin(), series.end());
    in.files.push_back(f + " [" + device_key + "]");
  }
  for (const auto& f : xla_gemm) {
    auto g = calib::import_xla_gemm(f, device_key);
    in.gemm.insert(in.gemm.end(), g.begin(), g.end());
    in.files.push_back(f + " [" + device_key + "]");
  }
  for (const auto& f : azure_gemm) {
    auto g = calib::import_azure_gemm(f);
    in.gemm.insert(in.gemm.end(), g.begin(), g.end());
    in.files.push_back(f);
  }
  for (const auto& f : calibrations) {
    auto c = calib::import_calibration(f);
    in.collectives.insert(in.collectives.end(), c.collectives.begin(), c.collectives.end());
    in.gemm.insert(in.gemm.end(), c.gemm.begin(), c.gemm.end());
    if (c.contention) in.contention.push_back(*c.contention);
    in.files.push_back(f);
  }
}

// Everything `fit` reads from its command line.
struct FitArgs {
  std::vector<std::string> logs, xla_coll, xla_gemm, azure_gemm, calibrations, notes, traces;
  std::string suite_file;  // --suite: the power-limited clock from the suite's fit split
  std::string trace_steps;
  int gpus_per_node = 8;
  int trace_group_size = 0;
  bool trace_group_size_given = false;
  bool trace_assumed_groups = false;
  std::string trace_statistic = "median";
  std::string base_file, out_file, device_key = "sm_90", samples = "both", name, description;
  double target = 0.05;
  int max_ranges = 6;
  std::string model = "auto";
  double min_bytes = 0;
  bool local_pass = false;
  double nvlink_ratio = 1;
  bool collectives_only = false;
  bool keep_sources = false;
  bool no_derive = false;
};

// The parsed command line; none when --help was given (the usage is printed).
std::optional<FitArgs> read_fit_args(const Args& args) {
  FitArgs a;
  po::options_description opts("fit options");
  opts.add_options()
      ("nccl-tests", po::value(&a.logs)->multitoken(), "nccl-tests logs (or all_reduce_bench markdown); LOG@N keeps run N")
      ("xla-collectives", po::value(&a.xla_coll)->multitoken(), "XLA collective_perf_table.csv")
      ("xla-gemm", po::value(&a.xla_gemm)->multitoken(), "XLA matmul_perf_table.csv (GEMM efficiency table)")
      ("gemm", po::value(&a.xla_gemm)->multitoken(), "same as --xla-gemm")
      ("azure-gemm", po::value(&a.azure_gemm)->multitoken(), "Azure AI-benchmarking-guide results markdown (its GEMM CuBLASLt table: sustained cuBLASLt rates)")
      ("xla-device", po::value(&a.device_key)->default_value("sm_90"), "device_key rows to take from the XLA tables")
      ("calibration", po::value(&a.calibrations)->multitoken(), "profiles written by stepsim calibrate (raw points)")
      ("trace", po::value(&a.traces)->multitoken(), "PyTorch profiler traces (.json/.json.gz) of your own job: NCCL kernel times by size and GEMM rates")
      ("trace-steps", po::value(&a.trace_steps), "with --trace: the ProfilerStep range a-b to use (default: all)")
      ("trace-assumed-groups", "with --trace: keep collectives whose group size the trace does not record (world size assumed; wrong for sub-groups)")
      ("trace-group-size", po::value(&a.trace_group_size), "with --trace: the size of the groups the trace does not record (e.g. 2 for tensor-parallel pairs); all such points get it")
      ("trace-statistic", po::value(&a.trace_statistic)->default_value("median"), "with --trace: median or min of the kernel times per (collective, group, size); min drops the wait for late ranks")
      ("gpus-per-node", po::value(&a.gpus_per_node)->default_value(8), "with --trace: a group larger than this spans nodes (inter_node scope)")
      ("base", po::value(&a.base_file), "profile supplying everything not measured (name, peaks, HBM, host costs)")
      ("name", po::value(&a.name), "profile name (default: the base profile's)")
      ("description", po::value(&a.description), "profile description (default: the base profile's)")
      ("target-error", po::value(&a.target)->default_value(0.05), "worst relative error per size range to aim for")
      ("max-ranges", po::value(&a.max_ranges)->default_value(6), "most size ranges per collective")
      ("samples", po::value(&a.samples)->default_value("both"), "nccl-tests columns: both, out-of-place, in-place")
      ("note", po::value(&a.notes)->multitoken(), "text recorded under provenance.notes (caveats about the inputs)")
      ("model", po::value(&a.model)->default_value("auto"), "collective model to fit: topology (NCCL's algorithms and protocols across node counts; needs a base profile with collectives.topology), alpha_beta (per-scope size ranges), or auto: topology when the base profile declares one, else alpha_beta")
      ("min-bytes", po::value(&a.min_bytes)->default_value(0), "with --model topology: fit only samples of at least this many bytes")
      ("local-pass", "with --model topology: fit the NVLink ring's local pass too (each rank's own S/n bytes not hidden by the wire steps; needs one-node series of two or more group sizes)")
      ("nvlink-bandwidth-ratio", po::value(&a.nvlink_ratio)->default_value(1), "with --model topology: the measured GPUs' NVLink bandwidth over the base profile's (e.g. 1.5 for A100 logs, 12 links, fitted for an A800, 8 links); fitted NVLink bandwidths are divided by it")
      ("collectives-only", "fit only the collective model (and, from --trace of several ranks, how they differ); compute, contention, host and attention numbers stay the base profile's (the GEMMs, attention calls and launch spacing of --trace are ignored)")
      ("no-derive", "do not derive missing all_reduce/all_gather/reduce_scatter from a measured one")
      ("keep-sources", "keep the base profile's sources entries for the numbers the fit replaces (tools/fit_profiles.sh: the shipped profiles describe their own fit); by default each replaced number's entry names the fit")
      ("suite", po::value(&a.suite_file), "a validation suite: fit the base profile's compute.clock.full_load_MHz (its power-limited clock) on the step times of the suite's \"fit\"-split cases that run on it; test cases are never read (docs/validation.md)")
      ("out", po::value(&a.out_file), "output profile JSON (default: stdout)");
  po::positional_options_description pos;
  po::variables_map vm;
  const std::string usage =
      "usage: stepsim fit [--nccl-tests LOG[@RUN]...] [--xla-collectives CSV] [--xla-gemm CSV] [--azure-gemm MD]\n"
      "                   [--calibration JSON...] [--trace TRACE...] --base PROFILE.json [--out profile.json]\n"
      "Fits piecewise alpha-beta collective models (least squares on time, R^2 and worst relative\n"
      "error reported per size range), a GEMM efficiency table and contention factors, and writes a\n"
      "profile recording the command and every input under \"provenance\".";
  if (!parse_args(args, usage, opts, pos, vm)) return std::nullopt;
  a.trace_group_size_given = vm.count("trace-group-size") > 0;
  a.trace_assumed_groups = vm.count("trace-assumed-groups") > 0;
  a.collectives_only = vm.count("collectives-only") > 0;
  a.local_pass = vm.count("local-pass") > 0;
  a.no_derive = vm.count("no-derive") > 0;
  a.keep_sources = vm.count("keep-sources") > 0;
  return a;
}

// The arguments that need no file: a base, some measurements, and values in range.
void check_fit_args(const FitArgs& a) {
  if (a.base_file.empty())
    throw InputError("fit: --base PROFILE.json is required: peaks, HBM bandwidth and host costs are not measured by fit");
  const bool measurements = !(a.logs.empty() && a.xla_coll.empty() && a.xla_gemm.empty() && a.azure_gemm.empty() &&
                              a.calibrations.empty() && a.traces.empty());
  if (!a.suite_file.empty() && measurements)
    throw InputError("fit: --suite fits the power-limited clock alone: expected no --nccl-tests, --xla-*, --azure-gemm, "
                     "--calibration or --trace with it");
  if (!a.suite_file.empty()) return;
  if (!measurements)
    throw InputError(
        "fit: no measurements given: expected --nccl-tests, --xla-collectives, --xla-gemm, --azure-gemm, --calibration or --trace");
  if (a.trace_statistic != "median" && a.trace_statistic != "min")
    throw InputError(fmt::format("fit: --trace-statistic {}: expected median or min", a.trace_statistic));
  if (a.trace_group_size_given && a.trace_group_size < 2)
    throw InputError(fmt::format("fit: --trace-group-size {}: expected a group size >= 2", a.trace_group_size));
  if (a.gpus_per_node < 1) throw InputError(fmt::format("fit: --gpus-per-node {}: expected a positive integer", a.gpus_per_node));
  if (a.target <= 0 || a.target >= 1) throw InputError(fmt::format("fit: --target-error {}: expected a fraction in (0, 1)", a.target));
  if (a.max_ranges < 1 || a.max_ranges > 32) throw InputError(fmt::format("fit: --max-ranges {}: expected 1..32", a.max_ranges));
}

// How to fit: size ranges, nccl-tests columns, model, and the command for the provenance.
calib::FitOptions fit_options(const FitArgs& a, const Args& args) {
  calib::FitOptions fo;
  fo.ranges.target_rel_error = a.target;
  fo.ranges.max_ranges = a.max_ranges;
  if (a.samples == "both") fo.samples = calib::SampleSelection::Both;
  else if (a.samples == "out-of-place") fo.samples = calib::SampleSelection::OutOfPlace;
  else if (a.samples == "in-place") fo.samples = calib::SampleSelection::InPlace;
  else throw InputError(fmt::format("fit: --samples {}: expected one of both, out-of-place, in-place", a.samples));
  fo.derive_missing = !a.no_derive;
  if (a.model != "auto" && a.model != "alpha_beta" && a.model != "topology")
    throw InputError(fmt::format("fit: --model {}: expected one of auto, topology, alpha_beta", a.model));
  if (a.min_bytes < 0) throw InputError(fmt::format("fit: --min-bytes {}: expected a non-negative size", a.min_bytes));
  fo.model = a.model == "topology"     ? calib::FitOptions::Model::Topology
             : a.model == "alpha_beta" ? calib::FitOptions::Model::AlphaBeta
                                       : calib::FitOptions::Model::Auto;
  fo.topology_options.min_bytes = a.min_bytes;
  if (!(a.nvlink_ratio > 0) || a.nvlink_ratio > 100)
    throw InputError(fmt::format("fit: --nvlink-bandwidth-ratio {}: expected a ratio in (0, 100]", a.nvlink_ratio));
  if ((a.local_pass || a.nvlink_ratio != 1) && a.model == "alpha_beta")
    throw InputError("fit: --local-pass and --nvlink-bandwidth-ratio apply to --model topology only");
  fo.topology_options.fit_local_pass = a.local_pass;
  fo.topology_options.nvlink_bandwidth_ratio = a.nvlink_ratio;
  fo.topology_options.in_place = fo.samples != calib::SampleSelection::OutOfPlace;
  fo.topology_options.out_of_place = fo.samples != calib::SampleSelection::InPlace;
  fo.command = "stepsim fit";
  for (const auto& arg : args) fo.command += " " + arg;
  return fo;
}

// Measurements from profiler traces of the user's own job (calibrate/trace): the same fit as
// microbenchmark logs (trace::fit_inputs states the options: assumed groups, a stated group
// size, the fastest occurrence instead of the median). Returns the trace data for the compute fit.
trace::TraceFitData add_trace_measurements(const FitArgs& a, calib::FitInputs& in,
                                           std::optional<trace::RankVariationFit>& ranks) {
  std::vector<trace::KinetoTrace> traces;
  for (const auto& f : a.traces) traces.push_back(trace::read_kineto_trace(f));
  // Several ranks of one job: how much they differ (docs/scale.md).
  if (traces.size() >= 2) ranks = trace::fit_rank_variation(traces);
  trace::AnalyzeOptions o;
  if (!a.trace_steps.empty()) trace::parse_step_range(a.trace_steps, o);
  trace::TraceCalibration c = trace::trace_calibration(
      traces, a.traces, o,
      trace::TraceFitOptions{a.trace_assumed_groups, a.trace_group_size, a.trace_statistic == "min", a.gpus_per_node});
  in.files.insert(in.files.end(), c.inputs.files.begin(), c.inputs.files.end());
  in.collectives.insert(in.collectives.end(), c.inputs.collectives.begin(), c.inputs.collectives.end());
  in.gemm.insert(in.gemm.end(), c.inputs.gemm.begin(), c.inputs.gemm.end());
  return std::move(c.data);
}

// Every measurement the command line names, imported.
struct Measurements {
  calib::FitInputs inputs;
  std::optional<trace::TraceFitData> trace;  // with --trace: its compute side
  std::optional<trace::RankVariationFit> ranks;  // with --trace of several ranks of one job
};

Measurements read_measurements(const FitArgs& a) {
  Measurements m;
  import_measurements(a.logs, a.xla_coll, a.xla_gemm, a.azure_gemm, a.calibrations, a.device_key, m.inputs);
  if (!a.traces.empty()) m.trace = add_trace_measurements(a, m.inputs, m.ranks);
  if (a.collectives_only) {
    // Only the collective model is refitted: the base keeps its GEMM table, contention, host
    // costs and attention rates (a trace's compute side is not applied either).
    m.inputs.gemm.clear();
    m.inputs.contention.clear();
    m.trace.reset();  // (the ranks' variation stays: it is how the ranks meet at collectives)
  }
  return m;
}

// The base profile with the measurements fitted in, named and with its provenance.
HardwareProfile fit_measured_profile(const FitArgs& a, const Measurements& m, const calib::FitOptions& fo,
                                     calib::FitReport& report) {
  HardwareProfile base = load_profile(a.base_file);
  if ((a.local_pass || a.nvlink_ratio != 1) && !calib::fits_topology(base, m.inputs, fo))
    throw InputError(fmt::format("fit: --local-pass and --nvlink-bandwidth-ratio apply to the topology model; the base "
                                 "profile {} declares no collectives.topology",
                                 a.base_file));
  HardwareProfile fitted = calib::fit_profile(base, m.inputs, fo, report);
  if (!a.name.empty()) fitted.name = a.name;
  if (!a.description.empty()) fitted.description = a.description;
  if (!a.notes.empty()) report.provenance["notes"] = a.notes;
  if (m.trace) {
    trace::apply_trace_compute(*m.trace, base.compute, fitted, report.provenance);
    calib::replaced_in_provenance(report.provenance, "trace_compute");
  }
  if (m.ranks) {
    fitted.rank_variation = m.ranks->with_base(base.rank_variation);
    report.provenance["rank_variation"] = m.ranks->to_json();
  }
  if (a.keep_sources) fitted.sources = base.sources;
  fitted.provenance = report.provenance;
  return fitted;
}

// `fit --suite`: the base profile with compute.clock.full_load_MHz fitted on the suite's fit split.
int fit_clock_from_suite(const FitArgs& a, const Args& args) {
  HardwareProfile base = load_profile(a.base_file);
  if (base.compute.clock.boost_mhz <= 0)
    throw InputError(fmt::format("fit: --suite: {}: /compute/clock: missing: expected the part's boost_MHz and power_limit_W "
                                 "(the clock fitted is the one that power limit sustains)",
                                 a.base_file));
  const validate::Suite suite = validate::load_suite(a.suite_file);
  const validate::ClockFit f = validate::fit_clock(suite, base.name, base.compute.clock);
  std::ostream& log = a.out_file.empty() ? std::cerr : std::cout;
  log << fmt::format("clock: {} at {:g} W: full_load_MHz {:g} (boost {:g} MHz) from {} fit-split step times; their median "
                     "signed error {:+.1f} % -> {:+.1f} %{}\n",
                     base.name, base.compute.clock.power_limit_w, f.full_load_mhz, base.compute.clock.boost_mhz, f.rows,
                     f.median_error_before, f.median_error_after, f.note.empty() ? "" : " (" + f.note + ")");
  base.compute.clock.full_load_mhz = f.full_load_mhz;
  std::string command = "stepsim fit";
  for (const auto& arg : args) command += " " + arg;
  nlohmann::json doc = profile_to_json(base);
  doc["provenance"]["clock"] = {{"command", command},           {"suite", a.suite_file},
                                {"split", "fit"},               {"rows", f.rows},
                                {"full_load_MHz", f.full_load_mhz}, {"median_error_before_pct", f.median_error_before},
                                {"median_error_after_pct", f.median_error_after}};
  if (!f.note.empty()) doc["provenance"]["clock"]["note"] = f.note;
  write_output(doc.dump(2) + "\n", a.out_file, "profile", log);
  return 0;
}

}  // namespace

int fit(const Args& args) {
  const std::optional<FitArgs> a = read_fit_args(args);
  if (!a) return 0;
  check_fit_args(*a);
  if (!a->suite_file.empty()) return fit_clock_from_suite(*a, args);
  const calib::FitOptions fo = fit_options(*a, args);
  const Measurements m = read_measurements(*a);
  calib::FitReport report;
  const HardwareProfile fitted = fit_measured_profile(*a, m, fo, report);
  nlohmann::json doc = calib::fitted_profile_to_json(fitted, report);

  // Summary on stderr when the profile goes to stdout, else on stdout.
  std::ostream& log = a->out_file.empty() ? std::cerr : std::cout;
  print_fit_summary(log, report);
  if (!m.inputs.gemm.empty()) log << fmt::format("gemm table: {} entries\n", fitted.compute.gemm_table.size());
  if (m.ranks) log << m.ranks->summary() << "\n";
  else if (a->traces.size() >= 2) log << "rank variation: no two traces ran the same kernel sequence; the base profile's kept\n";
  // How far the trace's GEMMs and memory-bound kernels are from what the base profile priced them at.
  if (const auto tc = report.provenance.find("trace_compute"); tc != report.provenance.end())
    for (const auto& line : trace::against_base_summary(*tc)) log << line << "\n";
  for (const auto& r : report.provenance.value("gemm", nlohmann::json::object()).value("rejected", nlohmann::json::array()))
    log << fmt::format("gemm table: left out {}'s {} rates ({} entries): {} above the {:.1f} TFLOP/s dense peak, up to {:.1f}\n",
                       r.at("file").get<std::string>(), r.at("dtype").get<std::string>(), r.at("entries").get<std::size_t>(),
                       r.at("above_peak").get<std::size_t>(), r.at("peak_tflops").get<double>(),
                       r.at("max_tflops").get<double>());
  // The training loop's own host time the profile now carries, with what it was made of: a
  // what-if of a script without that logging or data loading should not keep it.
  if (m.trace && report.provenance["trace_compute"].contains("step_end_us")) {
    const nlohmann::json& tc = report.provenance["trace_compute"];
    auto frames = [](const nlohmann::json& list) {
      std::string out;
      for (std::size_t i = 0; i < list.size() && i < 3; ++i)
        out += fmt::format("{}{} {}", i ? ", " : "", list[i].at("name").get<std::string>(),
                           format_time(Time::from_us(list[i].at("per_step_us").get<double>())));
      return out.empty() ? std::string("no frame") : out;
    };
    for (const auto& [key, frames_key, what] : {std::tuple{"step_start_us", "step_start_frames", "before its first GPU op"},
                                               std::tuple{"step_end_us", "step_end_frames", "after its last GPU op"}})
      log << fmt::format("host.{} {}: the training loop {} ({})\n", key, format_time(Time::from_us(tc.at(key).get<double>())), what,
                         frames(tc.value(frames_key, nlohmann::json::array())));
  }
  const nlohmann::json attention =
      m.trace ? report.provenance["trace_compute"].value("attention", nlohmann::json::object()) : nlohmann::json::object();
  for (const auto& [kernel, a] : attention.items())
    log << fmt::format("attention {}: forward {:.3f}, backward {:.3f} of peak at sequence {} ({}; the base profile's there "
                       "{:.3f} / {:.3f}) -> long-sequence rate {:.3f} / {:.3f} with half_rate_seq {}\n",
                       kernel, a.at("forward_fraction_of_peak").get<double>(), a.at("backward_fraction_of_peak").get<double>(),
                       a.at("seq").get<std::int64_t>(), a.at("causal").get<bool>() ? "causal" : "not causal",
                       a.at("base_forward_fraction_of_peak").get<double>(), a.at("base_backward_fraction_of_peak").get<double>(),
                       a.at("forward").get<double>(), a.at("backward").get<double>(), a.at("half_rate_seq").get<std::int64_t>());

  write_output(doc.dump(2) + "\n", a->out_file, "profile", log);
  return 0;
}

}  // namespace stepsim::cli
