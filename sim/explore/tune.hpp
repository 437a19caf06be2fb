#pragma once
// `stepsim tune`: the fastest configuration of an experiment's framework knobs that fits a
// memory cap (issue 5). Strategy-agnostic: the knobs searched are the framework's keys whose
// declaration lists `tune` settings (sim/strategies/strategy_keys.cpp), at their current value
// (the document's, else effective_config's), plus the workload's micro-batch/grad-accumulation
// split at a fixed global batch, and activation checkpointing; any combination the strategy
// rejects (InputError) is skipped.
//
// Objective (sim/explore/objective.hpp): tune keeps the global batch fixed, so every
// configuration does the same work per step and step time, tokens/s and MFU rank alike; the
// default is step_time and --objective changes only what is printed first.
// Memory cap: on the peak reserved memory (torch.cuda.max_memory_reserved(), what the caching
// allocator model predicts); the device check (reserved + memory outside PyTorch <= capacity)
// always applies.
//
// Search: the full grid of all knob settings when it has at most `max_grid` points, else
// coordinate descent from the baseline (one knob at a time, all its settings, keep the best
// that fits; repeat until a round improves nothing).

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/explore/noise.hpp"
#include "sim/explore/sweep.hpp"

namespace stepsim {

// One way to set a knob: the config paths it changes (usually one; micro-batch x grad_accum
// changes two).
using KnobSetting = std::vector<std::pair<std::string, nlohmann::json>>;

struct TuneKnob {
  std::string name;
  std::vector<KnobSetting> settings;  // the first is the baseline's own value
};

// The largest full grid `tune --max-grid` may ask for (docs/limits.md): each point is a simulation.
inline constexpr std::int64_t kMaxTuneGrid = std::int64_t{1} << 24;

struct TuneOptions {
  Bytes memory_cap;        // on peak reserved; 0: the profile's device capacity only
  std::optional<Objective> objective;  // empty: step_time
  std::size_t max_grid = 4096;  // 1 to kMaxTuneGrid (tune --max-grid)
  int jobs = 0;
};

struct TuneDiff {
  std::string path;
  nlohmann::json old_value;  // null when the key was absent (the strategy default applied)
  nlohmann::json new_value;
};

struct TuneResult {
  std::string framework;
  std::vector<TuneKnob> knobs;
  std::string method;  // "grid" | "coordinate descent"
  std::uint64_t evaluated = 0, invalid = 0, over_cap = 0;
  Bytes memory_cap;
  ObjectiveChoice objective;
  Metrics baseline;
  Throughput baseline_throughput;
  bool baseline_fits = false;
  bool found = false;
  Metrics best;
  Throughput best_throughput;
  std::vector<TuneDiff> diff;  // empty when the baseline is already the best
  // The best configuration's communicators priced outside the profile's fitted group sizes.
  std::vector<std::string> best_extrapolations;
  // The step-time error of the validated sources closest to the run (noise.hpp): a best
  // configuration faster by less than this is reported as no finding.
  NoiseFloor noise;
  double gain_pct() const;       // how much faster the best is than the baseline, %
  bool beats_noise() const { return !diff.empty() && gain_pct() > noise.pct; }
};

// The knobs of the experiment in `doc` (a resolved experiment document).
std::vector<TuneKnob> tune_knobs(const nlohmann::json& doc, const SourceMap& sources);

TuneResult tune(const nlohmann::json& doc, const SourceMap& sources, const TuneOptions& opts);
TuneResult tune_file(const std::filesystem::path& file, const std::vector<std::string>& overrides, const TuneOptions& opts);

// "80GiB", "80 GB", "512MiB", "85899345920" (bytes). Throws InputError.
Bytes parse_memory_size(const std::string& text);

// What one knob moved alone does (explain's "what would move the step"): every other setting of
// every tune knob, each from the experiment's own configuration, re-simulated; the settings that
// run and fit the device (reserved + memory outside PyTorch <= capacity), fastest first.
struct KnobMove {
  std::string what;     // "strategy.stage: 2 -> 3"; several paths joined by ", "
  Metrics metrics;
  double speedup = 1;   // baseline step time / this step time
};
std::vector<KnobMove> single_knob_moves(const nlohmann::json& doc, const SourceMap& sources, Time baseline, int jobs = 0);

void write_tune_text(std::ostream& out, const TuneResult& r);
nlohmann::json tune_to_json(const TuneResult& r);

}  // namespace stepsim
