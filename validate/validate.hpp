#pragma once
// `stepsim validate`: predictions against real measurements that others made (profiler traces
// and published training runs), case by case and summarised, with a regression gate.
//
// A suite (validation/suite.json) lists cases. A case is an experiment (the same JSON as
// `simulate` takes, inline or included) plus what was measured and where it comes from:
//  - "trace": a PyTorch profiler trace and a ProfilerStep range, measured by the same code as
//    `analyze` (mean over the steps);
//  - "published": the numbers a source published (step time, tokens/s, peak memory), with the
//    repository, commit, path and row they come from.
// A case may also name calibration traces: the experiment's profile is first refitted from
// them (`stepsim fit --trace`) before predicting, the cross-prediction of the issue.
//
// Errors, per metric:  error_pct = 100 * (predicted - measured) / measured, except overlap_pct
// whose error is in percentage points (predicted - measured). Summaries per source and overall:
// median and p90 of |error| and the bias (mean signed error). Pairs (the same run with one knob
// changed) compare the predicted and measured relative change in step time and whether the
// direction is right (a measured change under 2 % has no reliable direction: not counted).
//
// Gates (exit 3): a case metric beyond its tolerance; with a baseline, a summary median or p90
// more than 1 point worse than the baseline's (a regression), or more than 1 point better (the
// baseline is stale: a change that improves predictions updates the baseline in the same commit);
// a count of cases predicted over their GPUs' memory (CapacityCheck) that differs from the
// baseline's.

#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/config/json_reader.hpp"
#include "sim/explore/noise.hpp"
#include "sim/hardware/profile.hpp"

namespace stepsim::validate {

// kernels: CUDA kernels per step (the compute kernels of `simulate` and `analyze`'s class
// breakdown; collectives, memcpys and memsets excluded).
enum class Metric { StepTime, Forward, Backward, Optimizer, Compute, Comm, ExposedComm, OverlapPct, PeakAllocated, PeakReserved, Kernels };
inline constexpr Metric kAllMetrics[] = {Metric::StepTime,  Metric::Forward,    Metric::Backward,      Metric::Optimizer,
                                         Metric::Compute,   Metric::Comm,       Metric::ExposedComm,   Metric::OverlapPct,
                                         Metric::PeakAllocated, Metric::PeakReserved, Metric::Kernels};
std::string to_string(Metric m);            // "step_time", "peak_allocated", ...
std::optional<Metric> parse_metric(const std::string& name);
bool in_points(Metric m);                   // overlap_pct: error in percentage points
std::string unit_of(Metric m);              // "ms", "GiB", "%", "kernels"
double display_value(Metric m, double v);   // ns -> ms, bytes -> GiB

// Where a measurement comes from (echoed in every report).
struct Provenance {
  std::string repository, commit, path, row;
};

// The calibration split (docs/validation.md): "fit" rows are the only ones `fit --suite` may read
// to fit a profile parameter; "test" rows are what the accuracy claims are made on.
enum class Split { Fit, Test };
std::string to_string(Split s);  // "fit", "test"
// The rule, fixed before any error was seen (validation/tools/split_rule.py is the same rule):
// within a source, cases ordered by the 64-bit FNV-1a hash of their name (ties by name); the case
// at 0-based rank r is Fit when r % 3 == 2. Returns each name's split, in the order given.
std::vector<Split> split_by_rule(const std::vector<std::string>& names);

struct Case {
  std::string name;
  std::string source;           // summary group: "li-plus", "llm-foundry-a100", "torchtitan-pr165"
  Split split = Split::Test;    // a case file without "split" keys: every case Test
  bool split_declared = false;
  std::string description;
  std::string json_path;        // "/cases/3" in the suite document
  std::string file;             // the file that declares the case (the suite or an included case file)
  Provenance provenance;
  std::vector<std::string> assumptions;  // settings the source does not state, and what was used
  // Measured by trace...
  std::optional<std::filesystem::path> trace;
  std::string trace_steps;      // "11-12"; empty: every step in the trace
  // ...or published: the numbers as the source states them (converted when the case runs,
  // since tokens/s becomes a step time through the experiment's tokens per step).
  struct Published {
    std::optional<double> step_time_s;
    std::optional<double> tokens_per_s, global_batch_tokens;   // whole job
    std::optional<double> tokens_per_s_per_gpu_lo, tokens_per_s_per_gpu_hi;
    std::optional<double> peak_allocated_gib, peak_reserved_gib;
    std::optional<double> peak_active_pct, peak_reserved_pct, memory_capacity_gib;
  };
  std::optional<Published> published;
  // The experiment: a node of one of the suite's documents.
  std::size_t doc = 0;
  // Refit the profile from these traces before predicting (cross-prediction).
  std::vector<std::filesystem::path> calibration_traces;
  std::string calibration_steps;
  bool calibration_assumed_groups = false;  // fit --trace-assumed-groups: group = world size
  std::vector<Metric> metrics;  // compared; empty: every metric measured
  std::map<Metric, double> tolerance_pct;
};

struct PairSpec {
  std::string name, first, second, knob;
  std::string file, json_path;  // where it is declared, for errors
};

// One JSON file of the suite after includes: cases' experiments are read from it, so errors
// name the file and path where the user wrote them.
struct SuiteDocument {
  nlohmann::json doc;
  SourceMap sources;
};

struct Suite {
  std::string file;
  std::vector<SuiteDocument> docs;  // [0] the suite file, then each case file
  std::vector<Case> cases;
  std::vector<PairSpec> pairs;
  std::map<Metric, double> tolerance_pct;  // defaults; a case may override per metric
};

// Reads and checks a suite; every error is an InputError naming the file and JSON path.
Suite load_suite(const std::filesystem::path& file);

struct Row {
  std::string case_name, source;
  Split split = Split::Test;
  Metric metric = Metric::StepTime;
  double predicted = 0, measured = 0;
  double error = 0;             // percent (or points for overlap_pct)
  std::optional<double> tolerance;
  bool pass = true;
};

struct Summary {
  Split split = Split::Test;    // summaries never mix the splits
  std::string source;           // "all" for the overall row
  Metric metric = Metric::StepTime;
  int cases = 0;
  double median_abs = 0, p90_abs = 0, bias = 0;
};

// A summary over the cases of one facet value (`validate --by gpus`: every case on 64 GPUs), per
// source and over all sources ("all").
struct GroupSummary {
  std::string facet, value;
  Summary summary;
};

struct PairRow {
  std::string name, first, second, knob;
  double predicted_change_pct = 0, measured_change_pct = 0;
  std::optional<bool> sign_right;  // empty when the measured change is under 2 %
};

struct BaselineFinding {
  std::string what;             // "llm-foundry-a100 step_time median |error|", "pairs with the right sign"
  double baseline = 0, current = 0;
  bool regression = true;       // false: better than the baseline (the baseline is stale)
};

// A case's throughput (sim/analysis/throughput.hpp): reported, never gated, never in the
// baseline. The measured tokens/s is the experiment's tokens per step over the measured step
// time; the measured MFU is the predicted one scaled by predicted / measured step time (the
// same model FLOPs on the same GPUs).
struct CaseThroughput {
  double tokens_per_step = 0;
  double predicted_tokens_per_s = 0, predicted_mfu_pct = 0, predicted_hfu_pct = 0;  // MFU 0: toy or no peak
  std::optional<double> measured_tokens_per_s, measured_mfu_pct;
};

// The predicted peaks as fractions of the GPU's memory (each plus the memory outside PyTorch's
// allocator; 0 when the profile states no capacity), and the prediction's verdicts on them
// (Metrics::fits_allocated, Metrics::fits).
struct CaseMemory {
  double allocated_of_capacity = 0, reserved_of_capacity = 0;
  bool fits_allocated = true, fits = true;
  std::int64_t alloc_retries = 0, alloc_ooms = 0;  // per step (Metrics::alloc_retries, alloc_ooms)
};

// What `validate --by` groups cases by: each case's value read from its experiment as it ran
// (defaults applied): gpus "64", nodes "8", gpus_per_node "8", model "mpt-7b", implementation
// "llm_foundry", attention "flash_triton", framework "fsdp1" (ZeRO with its stage: "zero2"),
// checkpointing "full", compile "on", seq_len "2048", micro_batch "8", grad_accum "4", profile
// "a100-sxm-8x". A toy workload's model, implementation and attention are "toy".
const std::vector<std::string>& facet_names();

struct CaseInfo {
  std::string name, source, description;
  Provenance provenance;
  std::vector<std::string> assumptions, conversions;
  std::string measured_by;      // "trace FILE steps A-B" | "published"
  std::string calibrated_from;  // "" or the traces
  CaseThroughput throughput;
  CaseMemory memory;
  std::map<std::string, std::string> facets;  // facet_names() -> this case's value
};

// Every case is a run that happened on the GPUs it names: it fit in their memory, whatever else
// was measured. A prediction whose peak allocated (plus the memory outside PyTorch) is above the
// capacity contradicts the run; one whose peak reserved is above it (allocated below) is a run
// in which the caching allocator frees its cache and retries cudaMalloc (slower, possible).
// Counted per source and over all; the baseline holds the counts exactly.
struct CapacityCheck {
  std::string source;           // "all" for the overall row
  int cases = 0;                // cases whose profile states a capacity
  int allocated_over = 0;       // predicted peak allocated > capacity: contradicts the run
  int flushes = 0;              // allocated within, but the allocator model flushes its cache
  int at_risk = 0;              // allocated within, but a cudaMalloc fails even after a flush
};

struct Report {
  std::string suite_file;
  std::vector<CaseInfo> cases;
  std::vector<Row> rows;
  std::vector<Summary> summaries;  // per source then "all", per metric with a measurement
  std::vector<PairRow> pairs;
  std::vector<CapacityCheck> capacity;  // per source then "all"
  std::vector<BaselineFinding> baseline;
  bool baseline_checked = false;
  std::vector<GroupSummary> groups;  // group_summaries(), when asked for (never gated)
  int failed_rows() const;
  bool pass() const;            // no failed row and no baseline finding
};

// Predicts and measures every case (in this process, traces read once each). Throws
// InputError when a case cannot be run as written (an experiment that does not describe its
// published run, a step range with no step).
Report run_suite(const Suite& suite);

// A run of the fit split's cases only, each case's profile first passed through `adjust` (a
// parameter under fit): what `fit --suite` evaluates. No pairs (they may name test cases).
Report run_fit_split(const Suite& suite, const std::function<void(HardwareProfile&)>& adjust);

// `fit --suite`: the power-limited clock (compute.clock.full_load_MHz) of one profile, fitted on
// the step times of the fit split's cases that run on it, so that their median signed error is
// zero (bisection: a lower clock only lengthens a predicted step). Test rows are never read.
struct ClockFit {
  std::string profile;          // the profile's name
  int rows = 0;                 // fit-split step-time rows on it
  double full_load_mhz = 0;
  double median_error_before = 0, median_error_after = 0;  // signed, percent (before: the profile as loaded)
  std::string note;             // "" or why the value sits at a bound
};
// `clock` gives boost_MHz and power_limit_W (full_load_MHz is what is fitted). Throws InputError
// when no fit-split step time runs on the profile.
ClockFit fit_clock(const Suite& suite, const std::string& profile_name, const ClockProfile& clock);

// Throws InputError ("--by: ...") on a name outside facet_names().
void check_facets(const std::vector<std::string>& facets);
// Summaries of `metric`'s comparisons per value of each facet (values in numeric order where all
// are numbers), each per source then over all sources. Checks the names (check_facets).
std::vector<GroupSummary> group_summaries(const Report& r, const std::vector<std::string>& facets, Metric metric);

// How the model's weak-scaling curve compares with real runs: over the suite's GPU-count pairs
// (the two cases differ in their GPU and node counts only: every other facet equal), each
// change as a change per doubling of the GPUs, (1 + change)^(1 / log2(gpus2 / gpus1)) - 1, and
// the medians. In the baseline ("scale": gated like the summaries, kScaleSlackPoints), printed
// by `validate` under the pairs and by `stepsim scale` under its curve (docs/scale.md).
// Empty when the suite has no GPU-count pair.
std::optional<ScaleFidelity> gpu_pair_fidelity(const Report& r);
// The baseline's per-doubling medians may move this much (points) before the gate reports them.
inline constexpr double kScaleSlackPoints = 0.2;

// The summary part of a report, as committed in validation/baseline.json.
nlohmann::json baseline_json(const Report& r);
// Compares `r`'s summaries with a baseline document; fills r.baseline. Throws InputError on a
// malformed baseline (file and JSON path).
void check_baseline(Report& r, const nlohmann::json& baseline, const std::string& file, double slack_points);

nlohmann::json report_to_json(const Report& r);
std::string report_to_text(const Report& r);
std::string report_to_html(const Report& r);
// The scatter plots' +-10 % band in axis units: the square [lo, hi]^2 (x measured, y predicted)
// clipped to 0.9 x <= y <= 1.1 x; empty when the band misses the square.
std::vector<std::pair<double, double>> band_polygon(double lo, double hi);

}  // namespace stepsim::validate
