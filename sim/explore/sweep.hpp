#pragma once
// What-if sweeps (DESIGN.md section 3, issue 5): a base experiment plus axes over config
// paths (full grid) or listed points, run in parallel, streamed to CSV/JSON in point order.
//
// Sweep file:
//   {"name": "...", "base": {experiment, may be {"include": "x.json", ...}},
//    "axes": {"strategy.backward_prefetch": ["none", "backward_pre"], "cluster.nodes": [1, 2]},
//    "points": [{"strategy.bucket_cap_mb": 5}, ...],      (instead of, or with no, axes)
//    "constraints": ["peak_reserved_gib <= 80", "global_batch == 512"],
//    "objective": "tokens_per_s",                         (optional; sim/explore/objective.hpp)
//    "top": 5}
// Grid point i enumerates the axes in sorted path order (JSON objects are read sorted), the
// LAST axis varying fastest.
// Invariants: row i of every output is point i; a point that fails validation (InputError)
// or simulation is a row with status "invalid"/"error" and an error message, never fatal;
// the runner keeps the summary (best-k, Pareto candidates, per-axis means) and at most a block
// of rows evaluated ahead of their turn (kEvaluationBlock), never all of them.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/analysis/run.hpp"
#include "sim/analysis/throughput.hpp"
#include "sim/explore/objective.hpp"
#include "sim/hardware/profile_cache.hpp"
#include "sim/config/json_reader.hpp"

namespace stepsim {

struct SweepAxis {
  std::string path;                  // dotted config path, "strategy.bucket_cap_mb"
  std::vector<nlohmann::json> values;
};

// "metric OP number", metric one of the numeric CSV columns (or an alias like
// peak_memory_gib, step_time_ms).
struct SweepConstraint {
  std::string text;
  std::string metric;
  std::string op;  // <=, <, >=, >, ==, !=
  double value = 0;
};

// Step programs a sweep has built, for its points that differ only in what the build does not
// read: the hardware profile apart from its host section (the strategies read
// host.autograd_engine_per_node and host.monitor_write, build_step_program host.step_start and
// step_end; the cluster's shape is in the document). A sweep over profiles (a GPU type, a NIC's
// bandwidth in an inline profile) then prices one program at every point, as the engine prices
// kernels and collectives itself (issue 49). A program is found by the point's experiment
// document without cluster.profile and by the profile's host section; a strategy that comes to
// read more of the profile must add it to the match (sweep.cpp, run_sweep_point). Holds at most
// `max_instructions` instructions in all (a Llama-3-8B FSDP1 step is ~5,000, ~1.5 MB), the
// least recently used dropped; a larger program is not kept. Thread-safe.
class ProgramCache {
 public:
  static constexpr std::size_t kMaxInstructions = 200'000;
  explicit ProgramCache(std::size_t max_instructions = kMaxInstructions) : max_instructions_(max_instructions) {}
  std::shared_ptr<const Program> find(const std::string& key, const HostProfile& host) const;
  void add(const std::string& key, const HostProfile& host, std::shared_ptr<const Program> program);
  std::uint64_t hits() const;
  std::size_t held_instructions() const;

 private:
  struct Entry {
    std::string key;
    HostProfile host;
    std::shared_ptr<const Program> program;
    mutable std::uint64_t last_use = 0;
  };
  std::size_t max_instructions_;
  mutable std::mutex mutex_;
  mutable std::uint64_t uses_ = 0, hits_ = 0;
  std::vector<Entry> entries_;
  std::size_t held_ = 0;  // instructions of the programs in entries_
};

struct SweepSpec {
  std::string file;
  std::string name;
  nlohmann::json base;               // the experiment document, includes resolved
  SourceMap base_sources;            // paths relative to /base (so error messages name files)
  std::vector<SweepAxis> axes;       // grid axes (empty with explicit points)
  std::vector<nlohmann::json> points;  // explicit points: objects path -> value
  std::vector<std::string> columns;  // the varied paths, in order (axes or union of point keys)
  std::vector<SweepConstraint> constraints;
  std::optional<Objective> objective;  // requested (file or --objective); empty: the default
  int top = 5;
  // Profile files parsed once for all points (shared by copies of the spec and by threads).
  std::shared_ptr<ProfileCache> profiles = std::make_shared<ProfileCache>();
  // Workloads built once per distinct workload object, likewise (WorkloadCache). At most
  // kSweepWorkloads are kept (a Llama-3-8B op list is ~0.5 MB), the first ones; besides them each
  // worker keeps the one it built last (kWorkerWorkloads), and the runner evaluates a block's
  // points that build the same workload one after another (sweep_run.cpp), so a sweep whose
  // innermost axis changes the workload through more values than that builds each about once
  // per block and worker, not once per point.
  static constexpr std::size_t kSweepWorkloads = 32;
  static constexpr std::size_t kWorkerWorkloads = 1;
  // The points a runner evaluates out of order and holds rows of (a block; sweep_run.cpp).
  static constexpr std::uint64_t kEvaluationBlock = 8192;
  std::shared_ptr<WorkloadCache> workloads = std::make_shared<WorkloadCache>(kSweepWorkloads);
  // Programs shared by points that differ only in the profile, likewise (ProgramCache), used
  // when a column is the profile or inside it (no two points of another sweep can share one:
  // each differs in some other value); null: every point builds its own.
  std::shared_ptr<ProgramCache> programs = std::make_shared<ProgramCache>();

  std::uint64_t size() const;
  // A column is cluster.profile or a path inside it.
  bool varies_profile() const;
  // A column that can change the point's workload (its op list: WorkloadCache's key is the
  // workload object and training.torch_version; a DeepSpeed config sets workload keys).
  static bool may_change_workload(const std::string& column);
  // Point i's values in the columns that may change its workload, as one string: points whose
  // groups differ may build the same workload, points whose groups are equal build the same
  // one. "" when no column may change it.
  std::string workload_group(std::uint64_t i) const;
  // Point i as path -> value (only the varied paths).
  std::vector<std::pair<std::string, nlohmann::json>> point(std::uint64_t i) const;
};

SweepSpec load_sweep(const std::filesystem::path& file);
// From a parsed document (tests, tune). `sources` describes `doc`'s files (paths under /base).
SweepSpec sweep_from_json(const nlohmann::json& doc, const SourceMap& sources);
SweepConstraint parse_constraint(const std::string& text, const std::string& where);

// Sets a dotted path inside a document (creating objects).
void set_config_path(nlohmann::json& doc, const std::string& dotted, const nlohmann::json& value);

// One configuration's outcome. Metrics are valid only when status == "ok".
struct SweepRow {
  std::uint64_t index = 0;
  std::string status;  // ok | invalid (bad input) | error (simulation failed)
  std::string error;
  std::vector<nlohmann::json> values;  // per spec.columns
  std::string framework;
  int world_size = 0;
  Metrics metrics;
  Throughput throughput;        // valid when status == "ok"
  bool constraints_ok = false;  // fits constraints (and memory capacity); false unless ok
  // Communicators priced outside the profile's fitted group sizes (collective_extrapolations):
  // the CSV's extrapolated_comms column counts them, the JSON row lists them.
  std::vector<std::string> extrapolations;
  std::uint64_t points = 0;     // points in the whole sweep: the CSV's last column, so a merge
                                // can tell a complete set of shards from a missing or cut one
};

// The numeric value of a metric column / alias for constraints and the summary.
std::optional<double> metric_value(const SweepRow& r, const std::string& name);

// Runs one point (never throws for bad input: the row says why). Its workload is looked for in
// `workloads` (a worker's own cache in front of spec.workloads; null: built anew).
SweepRow run_sweep_point(const SweepSpec& spec, std::uint64_t index, WorkloadCache* workloads);

// The CSV header and one row (RFC 4180 quoting). Every metric has a column.
// One CSV field: quoted (quotes doubled, line breaks as blanks) when it holds a comma, quote or
// line break.
std::string csv_field(const std::string& s);
std::string sweep_csv_header(const SweepSpec& spec);
std::string sweep_csv_row(const SweepRow& r);
nlohmann::json sweep_row_json(const SweepSpec& spec, const SweepRow& r);

// What the summary keeps (bounded: best-k and the Pareto candidates).
struct SweepPointBrief {
  std::uint64_t index = 0;
  std::vector<std::string> values;   // rendered per column
  Time step_time;
  Bytes peak_memory;                 // peak allocated
  Bytes peak_reserved;               // the caching allocator's high-water mark
  Bytes capacity;                    // the device's memory
  double tokens_per_step = 0;        // the job's
  double mfu_pct = 0;                // rounded to 3 decimals, as in the CSV
  bool constraints_ok = false;
  ObjectiveInputs inputs() const { return {step_time, tokens_per_step, mfu_pct}; }
  // What the Pareto front and the memory charts use: peak reserved (what an OOM depends on),
  // or peak allocated when the allocator was not modelled (reserved 0).
  Bytes memory() const { return peak_reserved.count > 0 ? peak_reserved : peak_memory; }
};

// The ok points that had one value of an axis, accumulated.
struct AxisValueStats {
  std::uint64_t count = 0;
  double sum_step_ns = 0, sum_tokens_per_s = 0, sum_mfu_pct = 0, sum_memory_bytes = 0, sum_tokens_per_step = 0;
  Bytes max_memory;
  double mean(Objective o) const;  // in the objective's display unit (ms, tokens/s, %)
  double mean_memory_gib() const;
};

struct AxisEffect {
  std::string path;
  // value (rendered) -> stats over the ok points with that value, in first-seen order
  std::vector<std::pair<std::string, AxisValueStats>> by_value;
  // max mean - min mean over the values with points, in the objective's display unit
  double range(Objective o) const;
  double range_ns() const { return range(Objective::StepTime) * 1e6; }
  // Whether the mean tokens per step differs between this axis's values.
  bool changes_work() const;
  // Values with points, best mean first under `o` (ties: first seen first).
  std::vector<std::pair<std::string, AxisValueStats>> ranked(Objective o) const;
};

class SweepSummary {
 public:
  // `objective`: the requested one; empty: chosen from the points when asked (see objective()).
  explicit SweepSummary(std::vector<std::string> columns, int top = 5, std::optional<Objective> objective = std::nullopt);
  void add(const SweepPointBrief& p, const std::string& status);
  // The step-time error of the validated sources closest to the sweep's base (noise.hpp): a
  // best point within it of the first is marked as a tie in the text table.
  void set_noise_pct(double pct) { noise_pct_ = pct; }
  double noise_pct() const { return noise_pct_; }
  std::uint64_t total() const { return total_; }
  std::uint64_t ok() const { return ok_; }
  std::uint64_t feasible() const { return feasible_; }
  std::uint64_t invalid() const { return total_ - ok_; }
  // The objective the outputs rank by, and why (sim/explore/objective.hpp): the requested one,
  // else tokens_per_s when the ok points' tokens per step differ, else step_time.
  ObjectiveChoice objective() const;
  // Best points under the objective that satisfy the constraints, best first.
  std::vector<SweepPointBrief> best() const { return best(objective().objective); }
  std::vector<SweepPointBrief> best(Objective o) const;
  // Points not dominated in (objective, memory()) among ok points, best objective first.
  std::vector<SweepPointBrief> pareto() const { return pareto(objective().objective); }
  std::vector<SweepPointBrief> pareto(Objective o) const;
  // Axes sorted by the range of the objective's mean across their values, largest first.
  std::vector<AxisEffect> effects() const { return effects(objective().objective); }
  std::vector<AxisEffect> effects(Objective o) const;
  // The memory limit drawn on the charts: the tightest memory constraint, else the device's
  // capacity (largest seen); 0 when neither is known.
  void set_memory_cap(Bytes cap, std::string what);
  Bytes memory_cap() const;
  std::string memory_cap_what() const;
  const std::vector<std::string>& columns() const { return columns_; }
  // A bounded sample of (step, memory, feasible) for plots: the first kScatterMax ok points.
  static constexpr std::size_t kScatterMax = 4000;
  const std::vector<SweepPointBrief>& scatter() const { return scatter_; }

  nlohmann::json to_json() const;
  void write_text(std::ostream& out) const;

 private:
  std::vector<std::string> columns_;
  std::size_t top_;
  std::optional<Objective> requested_;
  std::uint64_t total_ = 0, ok_ = 0, feasible_ = 0;
  // Per objective (kObjectives order): every objective is kept while streaming, so the default
  // can be chosen from all the points at the end.
  std::vector<SweepPointBrief> best_[kObjectiveCount];    // sorted, at most top_
  double noise_pct_ = 0;
  std::vector<SweepPointBrief> pareto_[kObjectiveCount];  // best objective first, strictly decreasing memory
  std::vector<AxisEffect> effects_;
  // Per axis: a value's position in effects_[a].by_value. A scan of by_value per point was
  // quadratic in an axis's values (a 1,000,000-point sweep over 62,500 sequence lengths spent a
  // tenth of its CPU comparing them, on the thread that writes the rows).
  std::vector<std::unordered_map<std::string, std::size_t>> value_slots_;
  std::vector<SweepPointBrief> scatter_;
  double min_tokens_per_step_ = 0, max_tokens_per_step_ = 0, max_mfu_pct_ = 0;
  Bytes cap_, max_capacity_;
  std::string cap_what_;
};

SweepPointBrief brief_of(const SweepRow& r);
std::string render_value(const nlohmann::json& v);  // strings raw, others compact JSON

// Sweep sizes (docs/limits.md). A grid is refused above kMaxSweepGridPoints (the index must
// fit, whatever --max-points says); one run (one shard) is refused above its --max-points,
// kDefaultMaxSweepPoints unless raised (a point costs about 0.1 ms and 300 bytes of CSV).
inline constexpr std::uint64_t kMaxSweepGridPoints = std::uint64_t{1} << 48;
inline constexpr std::uint64_t kDefaultMaxSweepPoints = 1'000'000;

struct SweepOptions {
  int jobs = 0;                 // 0 = hardware concurrency
  int shard = 0, shards = 1;    // run points with index % shards == shard
  bool progress = false;        // draw a progress bar on stderr
  std::uint64_t skip = 0;       // the shard's first points already done (sweep --resume): not run again
};

// Runs the sweep; calls `sink` with rows in increasing index order (from the calling
// thread). Returns the summary. Memory: at most O(jobs) rows are buffered.
SweepSummary run_sweep(const SweepSpec& spec, const SweepOptions& opts, const std::function<void(const SweepRow&)>& sink);
// The same, continuing `start` (the rows of the opts.skip points already done).
SweepSummary run_sweep(const SweepSpec& spec, const SweepOptions& opts, const std::function<void(const SweepRow&)>& sink,
                       SweepSummary start);
// A run where no point is a valid experiment is an input error (the base config itself, most
// likely): InputError naming the sweep file, the point count and `first_invalid` ("point I:
// MESSAGE" of the first invalid row). The CLI's sweep and the Python API's call this after a run.
void check_some_point_valid(const SweepSpec& spec, const SweepSummary& s, const std::string& first_invalid);

// The summary a run of `spec` starts from (its columns, top, objective and memory cap).
SweepSummary empty_sweep_summary(const SweepSpec& spec);

// `sweep --resume`: the rows of a CSV an interrupted run left (`partial`, F.csv.partial). Its
// header must be the sweep's and its rows this shard's points from the first on, in order, each
// of the sweep's point count; a last line cut short is dropped. Writes the header and those
// rows to `out`, adds them to `summary`, and returns how many there are (SweepOptions::skip).
std::uint64_t resume_sweep_csv(const std::filesystem::path& partial, const SweepSpec& spec, const SweepOptions& opts,
                               std::ostream& out, SweepSummary& summary);

// Joins shard CSVs (same header) into rows ordered by index; the result is byte-identical to
// the unsharded CSV. Streams: one pending row per shard (shards are in point order). Throws
// InputError on mismatched headers, duplicate indices or rows out of point order, and on any
// field the writer would not have written (a status other than ok/invalid/error, a world size
// outside 1 .. 2^20, a metric that is not a number, a metric on a failed row...). With `spec`
// (the sweep file), the header must be the sweep's, every row of its point count, and each
// row's varied paths the values of the point its index names.
// Also rebuilds the summary from the rows' columns.
SweepSummary merge_sweep_csv(const std::vector<std::filesystem::path>& inputs, std::ostream& out, int top = 5,
                             std::optional<Objective> objective = std::nullopt, const SweepSpec* spec = nullptr);

// The varied paths' fields of point `index` of `spec` as a CSV row holds them once split
// (split_csv_line): what sweep_csv_row writes for the point.
std::vector<std::string> sweep_point_csv_fields(const SweepSpec& spec, std::uint64_t index);

// The memory cap the constraints impose (the smallest bound of a `<=`/`<` constraint on a
// peak memory metric), with its text; nullopt when there is none.
std::optional<std::pair<Bytes, std::string>> constraint_memory_cap(const std::vector<SweepConstraint>& constraints);

// Splits one CSV line (RFC 4180; no embedded newlines).
std::vector<std::string> split_csv_line(const std::string& line);

}  // namespace stepsim
