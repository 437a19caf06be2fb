#pragma once
// What-if sweeps (DESIGN.md section 3, issue 5): a base experiment plus axes over config
// paths (full grid) or listed points, run in parallel, streamed to CSV/JSON in point order.
//
// Sweep file:
//   {"name": "...", "base": {experiment, may be {"include": "x.json", ...}},
//    "axes": {"strategy.backward_prefetch": ["none", "backward_pre"], "cluster.nodes": [1, 2]},
//    "points": [{"strategy.bucket_cap_mb": 5}, ...],      (instead of, or with no, axes)
//    "constraints": ["peak_memory_gib <= 80", "step_time_ms < 900"],
//    "top": 5}
// Grid point i enumerates the axes in sorted path order (JSON objects are read sorted), the
// LAST axis varying fastest.
// Invariants: row i of every output is point i; a point that fails validation (InputError)
// or simulation is a row with status "invalid"/"error" and an error message, never fatal;
// the runner keeps only the summary (best-k, Pareto candidates, per-axis means), not rows.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/analysis/run.hpp"
#include "sim/analysis/throughput.hpp"
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

struct SweepSpec {
  std::string file;
  std::string name;
  nlohmann::json base;               // the experiment document, includes resolved
  SourceMap base_sources;            // paths relative to /base (so error messages name files)
  std::vector<SweepAxis> axes;       // grid axes (empty with explicit points)
  std::vector<nlohmann::json> points;  // explicit points: objects path -> value
  std::vector<std::string> columns;  // the varied paths, in order (axes or union of point keys)
  std::vector<SweepConstraint> constraints;
  int top = 5;
  // Profile files parsed once for all points (shared by copies of the spec and by threads).
  std::shared_ptr<ProfileCache> profiles = std::make_shared<ProfileCache>();

  std::uint64_t size() const;
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
  std::uint64_t points = 0;     // points in the whole sweep: the CSV's last column, so a merge
                                // can tell a complete set of shards from a missing or cut one
};

// The numeric value of a metric column / alias for constraints and the summary.
std::optional<double> metric_value(const SweepRow& r, const std::string& name);

// Runs one point (never throws for bad input: the row says why).
SweepRow run_sweep_point(const SweepSpec& spec, std::uint64_t index);

// The CSV header and one row (RFC 4180 quoting). Every metric has a column.
std::string sweep_csv_header(const SweepSpec& spec);
std::string sweep_csv_row(const SweepRow& r);
nlohmann::json sweep_row_json(const SweepSpec& spec, const SweepRow& r);

// What the summary keeps (bounded: best-k and the Pareto candidates).
struct SweepPointBrief {
  std::uint64_t index = 0;
  std::vector<std::string> values;   // rendered per column
  Time step_time;
  Bytes peak_memory;
  bool constraints_ok = false;
};

struct AxisEffect {
  std::string path;
  // value (rendered) -> (sum of step time ns over ok points, count)
  std::vector<std::pair<std::string, std::pair<double, std::uint64_t>>> by_value;
  double range_ns() const;  // max mean - min mean over values with points
};

class SweepSummary {
 public:
  explicit SweepSummary(std::vector<std::string> columns, int top = 5);
  void add(const SweepPointBrief& p, const std::string& status);
  std::uint64_t total() const { return total_; }
  std::uint64_t ok() const { return ok_; }
  std::uint64_t feasible() const { return feasible_; }
  std::uint64_t invalid() const { return total_ - ok_; }
  // Fastest points that satisfy the constraints, fastest first.
  std::vector<SweepPointBrief> best() const;
  // Points not dominated in (step time, peak memory) among ok points, by step time.
  std::vector<SweepPointBrief> pareto() const;
  // Axes sorted by the range of mean step time across their values, largest first.
  std::vector<AxisEffect> effects() const;
  const std::vector<std::string>& columns() const { return columns_; }
  // A bounded sample of (step, memory, feasible) for plots: the first kScatterMax ok points.
  static constexpr std::size_t kScatterMax = 4000;
  const std::vector<SweepPointBrief>& scatter() const { return scatter_; }

  nlohmann::json to_json() const;
  void write_text(std::ostream& out) const;

 private:
  std::vector<std::string> columns_;
  std::size_t top_;
  std::uint64_t total_ = 0, ok_ = 0, feasible_ = 0;
  std::vector<SweepPointBrief> best_;    // sorted, at most top_
  std::vector<SweepPointBrief> pareto_;  // sorted by step time, strictly decreasing memory
  std::vector<AxisEffect> effects_;
  std::vector<SweepPointBrief> scatter_;
};

SweepPointBrief brief_of(const SweepRow& r);
std::string render_value(const nlohmann::json& v);  // strings raw, others compact JSON

struct SweepOptions {
  int jobs = 0;                 // 0 = hardware concurrency
  int shard = 0, shards = 1;    // run points with index % shards == shard
  bool progress = false;        // draw a progress bar on stderr
};

// Runs the sweep; calls `sink` with rows in increasing index order (from the calling
// thread). Returns the summary. Memory: at most O(jobs) rows are buffered.
SweepSummary run_sweep(const SweepSpec& spec, const SweepOptions& opts, const std::function<void(const SweepRow&)>& sink);

// Joins shard CSVs (same header) into rows ordered by index; the result is byte-identical to
// the unsharded CSV. Streams: one pending row per shard (shards are in point order). Throws
// InputError on mismatched headers, duplicate indices or rows out of point order.
// Also rebuilds the summary from the rows' columns.
SweepSummary merge_sweep_csv(const std::vector<std::filesystem::path>& inputs, std::ostream& out, int top = 5);

// Splits one CSV line (RFC 4180; no embedded newlines).
std::vector<std::string> split_csv_line(const std::string& line);

}  // namespace stepsim
