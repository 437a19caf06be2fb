#pragma once
// Turns imported measurements into a hardware profile (sim/hardware/profile.hpp format):
//  - collectives: per scope (intra_node: series on one node; inter_node: series spanning nodes)
//    and collective kind, piecewise alpha-beta ranges fitted by fit_ranges on the group with
//    the most ranks in that scope, written with that group size ("ranks") so the model rescales
//    the bandwidth term for other group sizes; the other measured group sizes of that scope go
//    under "groups" (a communicator uses the nearest measured size) and into provenance;
//  - all_reduce / all_gather / reduce_scatter missing from a scope are derived from a measured
//    one by bus-bandwidth equivalence (same bytes on the wire per rank: beta scales with the
//    busbw factor ratio, alpha with the ring-step ratio) and marked "derived_from";
//  - NCCL-style ring constants (base latency, per-step latency, busbw) by least squares across
//    group sizes where a scope has at least two group sizes of one kind (report only);
//  - compute.gemm_table from GEMM samples, gemm_efficiency as the median over large bf16 GEMMs;
//  - contention slowdowns from co-run samples.
// Everything not measured (name, peaks, HBM, host costs, sources) comes from the base profile.

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "calibrate/fit/alpha_beta.hpp"
#include "calibrate/fit/topology_fit.hpp"
#include "calibrate/measurements.hpp"
#include "sim/hardware/profile.hpp"

namespace stepsim::calib {

enum class SampleSelection { Both, OutOfPlace, InPlace };

struct FitInputs {
  std::vector<CollectiveSeries> collectives;
  std::vector<GemmSample> gemm;
  std::vector<ContentionSample> contention;
  std::vector<std::string> files;  // every input file, for provenance
};

struct FitOptions {
  RangeFitOptions ranges;
  SampleSelection samples = SampleSelection::Both;
  bool derive_missing = true;
  // The collective model to fit: the topology-aware NCCL model (the base profile's
  // collectives.topology declares the hardware), per-scope alpha-beta ranges, or Auto: the
  // topology model when the base declares one and a collective was measured on >= 2 ranks, else
  // alpha-beta ranges (without collective measurements the base's model stays either way).
  enum class Model { Auto, Topology, AlphaBeta };
  Model model = Model::Auto;
  TopologyFitOptions topology_options;
  std::string command;  // the command line, recorded in provenance
};

// Whether `opt` fits the topology model over `base` for the measurements `in`.
bool fits_topology(const HardwareProfile& base, const FitInputs& in, const FitOptions& opt);

// One fitted (scope, kind, group shape).
struct KindFit {
  std::string scope;  // "intra_node" | "inter_node"
  CollectiveKind kind = CollectiveKind::AllReduce;
  int ranks = 0;
  int nodes = 1;
  std::vector<std::string> sources;  // "file (label)" of each series merged
  std::vector<FitPoint> points;
  std::vector<LineFit> ranges;
  bool in_profile = false;
  std::optional<CollectiveKind> derived_from;
};

struct RingFit {
  std::string scope;
  CollectiveKind kind = CollectiveKind::AllReduce;
  std::vector<int> group_sizes;
  double base_latency_us = 0, step_latency_us = 0, busbw_gbps = 0;
  double r2 = 0, max_rel_error = 0;
  int points = 0;
};

struct FitReport {
  std::vector<KindFit> fits;
  std::vector<RingFit> ring_fits;
  std::optional<TopologyFitReport> topology;
  nlohmann::json provenance;
};

std::vector<FitPoint> fit_points(const CollectiveSeries& s, SampleSelection sel);

// Fits `inputs` into a copy of `base`; the report holds every fit and the provenance object.
// What the base's provenance records of a part this fit leaves as it is (its collectives, GEMM
// table, contention, trace compute, memory bandwidths, raw calibration) goes on under
// provenance.kept_from_base.<part>, with the base's command, inputs and notes.
HardwareProfile fit_profile(const HardwareProfile& base, const FitInputs& inputs, const FitOptions& options,
                            FitReport& report);

// profile_to_json plus the fit diagnostics (min_bytes, r2, max_rel_error, points) in each range
// of the fitted scopes, and report.provenance under "provenance".
nlohmann::json fitted_profile_to_json(const HardwareProfile& profile, const FitReport& report);

// A caller that sets provenance[part] after fit_profile (trace_compute, membw, calibration)
// drops the kept record of the base's.
void replaced_in_provenance(nlohmann::json& provenance, const std::string& part);

// Time of `kind` with S bytes on `ranks` ranks predicted from a fit made at fit.ranks, by the
// simulator's alpha-beta model: across group sizes the bandwidth term moves by bus bandwidth
// (C6.1: busbw is what carries over) and the latency is kept as measured.
double predict_time_us(const KindFit& fit, double bytes, int ranks);
double predict_busbw_gbps(const KindFit& fit, double bytes, int ranks);

}  // namespace stepsim::calib
