#pragma once
// Fits the topology-aware NCCL model (sim/hardware NcclTopology, docs/collectives.md) to
// measured collectives at whatever group shapes exist: each series informs one bandwidth level
// by its shape (one node: the NVLink ring, or NVLS for all-reduce where the profile declares
// it; several nodes: the NICs; all-to-all its own two levels), and per level a weighted least
// squares (weights 1/t^2, as the alpha-beta fits) finds the level's bandwidth and, for the
// NVLink and network levels, the scale on NCCL's hop latencies. The algorithm and protocol of
// each point is the one the model itself picks (NCCL's tuner rules), re-chosen until stable.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "calibrate/measurements.hpp"
#include "sim/hardware/profile.hpp"

namespace stepsim::calib {

struct TopologyFitOptions {
  double min_bytes = 0;     // only samples of at least this size
  bool in_place = true;     // use the in-place column group
  bool out_of_place = true; // use the out-of-place column group
  // Fit the NVLink level's local pass (NcclTopology::nvlink_local_bw) as a third parameter; it
  // separates from the wire bandwidth only across group sizes (its S/n against the wire's
  // S (n-1)/n), so the NVLink series must span at least two.
  bool fit_local_pass = false;
  // The measured GPUs' NVLink bandwidth over the profile's (e.g. 12 / 8 = 1.5: logs of an A100
  // for an A800); the fitted NVLink-level bandwidths (ring, NVLS, all-to-all) are divided by it.
  // The local pass and the network are not scaled.
  double nvlink_bandwidth_ratio = 1;
};

struct LevelFit {
  std::string level;  // nvlink | nvls | network | nvlink_all_to_all | network_all_to_all
  bool fitted = false;
  double bandwidth_gbps = 0;
  double latency_scale = -1;  // -1: not a parameter of this level
  double local_gbps = -1;     // the NVLink level's local pass; -1: not fitted
  double measured_bandwidth_gbps = 0;  // before options.nvlink_bandwidth_ratio (0: not scaled)
  int points = 0;
  double median_abs_error = 0, max_abs_error = 0;  // relative time error after the fit
  std::vector<std::string> series;                 // "source (label): kind n ranks / m nodes"
  std::string note;
};

struct TopologyFitReport {
  std::vector<LevelFit> levels;
  FittedRange range;
  nlohmann::json to_json() const;
};

// Fits the levels `series` inform into a copy of `base` (its arch, GPUs and NICs per node and
// whether NVLS exists are declared, not fitted); levels without data keep `base`'s numbers.
// Throws InputError when no series can be used.
NcclTopology fit_topology(const NcclTopology& base, const std::vector<CollectiveSeries>& series,
                          const TopologyFitOptions& options, TopologyFitReport& report);

// Relative time error |predicted - measured| / measured of every sample of `s` under `t`.
std::vector<double> topology_errors(const NcclTopology& t, const CollectiveSeries& s, const TopologyFitOptions& options);

}  // namespace stepsim::calib
