#pragma once
// How much the ranks of one job differ (RankVariation, docs/scale.md), from the profiler traces of
// several of its ranks: ranks that ran the same kernels in the same order (the data-parallel
// replicas, the two GPUs of a tensor-parallel pair) are compared kernel by kernel; ranks whose
// optimizers differ (a distributed optimizer) over the kernels of each step before its optimizer.

#include <array>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/hardware/profile.hpp"
#include "trace/kineto_trace.hpp"

namespace stepsim::trace {

struct RankVariationFit {
  RankVariation variation;
  std::vector<std::string> pairs;                // "rank 0 / rank 1" of each pair compared
  int pairs_before_optimizer = 0;                // of them, compared step by step before the optimizer
  std::size_t steps_before_optimizer = 0;        // the most steps such a pair had in common
  std::array<int, kKernelClassCount> kernels{};  // kernels compared per class (over all pairs)
  nlohmann::json to_json() const;
  std::string summary() const;  // one line for fit's log
  // The fitted variation, with the classes too few kernels measured (kRankVariationMinKernels)
  // kept from `base` (the base profile supplies what is not measured), and said so in its source.
  RankVariation with_base(const RankVariation& base) const;
};

// Kernels shorter than this are left out (launch-bound: their spread is the host's, not the GPU's).
inline constexpr double kRankVariationMinKernelUs = 5.0;
// A class needs this many compared kernels for its spread to be fitted.
inline constexpr int kRankVariationMinKernels = 20;

// Per class, the robust standard deviation (1.4826 x the median absolute deviation) of
// (d1 - d2) / mean(d1, d2) / sqrt(2) over the kernels of each pair: one rank's relative spread
// kernel by kernel, once the pair's own offset is taken out; a one-off outlier (a kernel one rank
// ran while the other waited on a page fault) does not move it. persistent_cv: the root mean
// square over pairs of log(sum d1 / sum d2) / sqrt(2) over the kernels within 25 % of each
// other, each rank's own speed. host_cv is not
// fitted (0). Empty when no two traces ran the same kernel sequence, whole or before the optimizer
// of a step they share.
std::optional<RankVariationFit> fit_rank_variation(const std::vector<KinetoTrace>& traces);

}  // namespace stepsim::trace
