#pragma once
// `stepsim scale`: the weak-scaling curve of an experiment (issue 46). Each point is the
// experiment with cluster.nodes set (after the user's --set overrides), exactly as
// `simulate --set cluster.nodes=K` runs it: the per-GPU batch (micro-batch, sequence, gradient
// accumulation) is unchanged, so the tokens per step grow with the GPUs. Per point: step time,
// tokens/s per GPU, efficiency (tokens/s per GPU over the first point's), the step split into
// disjoint parts (sim/analysis/step_parts.hpp) so that the change from the first point is the
// sum of the parts' changes, the collective algorithm NCCL picks per kind and communicator,
// and the communicators priced outside the profile's fitted group sizes.

#include <filesystem>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/analysis/metrics.hpp"
#include "sim/analysis/step_parts.hpp"
#include "sim/analysis/throughput.hpp"
#include "sim/explore/noise.hpp"

namespace stepsim {

inline constexpr const char* kScaleSchema = "stepsim.scale/1";
// At most this many points per run (docs/limits.md): each is one simulation.
inline constexpr std::size_t kMaxScalePoints = 64;

// The GPU counts of --nodes (flag "nodes": node counts) or --gpus (flag "gpus": GPU counts, each
// a multiple of gpus_per_node) as node counts: comma-separated integers, increasing, at most
// kMaxScalePoints, each within cluster.nodes' and the world size's limits. InputError
// "--FLAG TEXT: ...: expected ..." otherwise.
std::vector<int> parse_scale_counts(const std::string& flag, const std::string& text, int gpus_per_node);

struct ScalePoint {
  int nodes = 0, gpus = 0;
  Metrics metrics;
  Throughput throughput;
  StepParts parts;
  // "<kind> on <comm>" -> the algorithm/protocol NCCL picks for its collectives ("Ring/Simple"),
  // by bytes when they differ ("Ring/Simple 92%, Tree/LL 8%"); the scope model's name without a
  // topology model, "local" on one rank.
  std::map<std::string, std::string> algorithms;
  std::vector<std::string> extrapolations;  // collective_extrapolations of the point's program
};

struct ScaleResult {
  std::string file;
  std::string framework, model, profile;
  int gpus_per_node = 0;
  std::int64_t micro_batch = 0, seq_len = 0, grad_accum = 0;
  double parameters = 0;
  std::vector<ScalePoint> points;
  // How the suite's real runs scaled against their predictions (validation/baseline.json), for a
  // profile of a real GPU class; empty for a toy profile or without the suite.
  std::optional<ScaleFidelity> validation;

  // Tokens/s per GPU of point i over point 0's, in percent.
  double efficiency_pct(std::size_t i) const;
  // Every "<kind> on <comm>" with exposed time or an algorithm at some point, sorted.
  std::vector<std::string> collective_labels() const;
};

// What to run: the experiment, its --set overrides (cluster.nodes among them is refused: each
// point sets it) and the points, as --nodes or --gpus gave them (parse_scale_counts; an empty
// text: kDefaultScaleNodes).
struct ScaleRequest {
  std::filesystem::path file;
  // The experiment's JSON text when it comes from memory (the Python API's dicts; `file` names
  // it in messages); empty: read `file`.
  std::string doc_text;
  std::vector<std::string> overrides;
  std::string flag = "nodes";  // "nodes" | "gpus"
  std::string counts;
};
inline constexpr const char* kDefaultScaleNodes = "1,2,4,8,16";

// Runs every point. A point the experiment refuses (a batch or mesh fixed to one world size)
// is an InputError naming the point.
ScaleResult run_scale(const ScaleRequest& request);

nlohmann::json scale_to_json(const ScaleResult& r);
std::string scale_csv(const ScaleResult& r);
void write_scale_text(std::ostream& out, const ScaleResult& r);
// The validation note of the text and HTML outputs, its lines joined by `line_break`.
std::string scale_fidelity_text(const ScaleFidelity& v, const std::string& line_break);

}  // namespace stepsim
