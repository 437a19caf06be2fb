// Fitting the topology-aware NCCL model (issue 15, item 2): parameters recovered from synthetic
// measurements, and the leave-one-out target over the five h100-cluster01 logs.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

#include "calibrate/fit/topology_fit.hpp"
#include "calibrate/importers/nccl_tests_log.hpp"
#include "sim/hardware/collective_model.hpp"

using namespace stepsim;
using namespace stepsim::calib;

namespace {

const std::string kCluster = std::string(STEPSIM_TEST_DATA) + "/nccl-tests/h100-cluster01-xxrjun/";
const char* kLogs[] = {"nccl_N1_G8_cnode3-003.log", "nccl_N1_G4_cnode3-003.log", "nccl_N2_G1_cnode3-002_cnode3-003.log",
                       "nccl_N10_G1.log", "nccl_N10_G2.log"};

NcclTopology declared_h100() {
  // What the hardware declares (not fitted): Hopper, 8 GPUs and 8 NICs per node, NVLS present.
  NcclTopology t;
  t.arch = NcclArch::Hopper;
  t.gpus_per_node = 8;
  t.nics_per_node = 8;
  t.nvlink_busbw = Bandwidth::from_gbps(450);
  t.nvls_bw = Bandwidth::from_gbps(450);
  t.nic_bw = Bandwidth::from_gbps(50);
  return t;
}

CollectiveSeries synthetic(const NcclTopology& truth, CollectiveKind kind, int ranks, int nodes) {
  CollectiveSeries s;
  s.source = "synthetic";
  s.kind = kind;
  s.ranks = ranks;
  s.nodes = nodes;
  for (std::int64_t b = 1024; b <= (1LL << 33); b *= 4)
    s.samples.push_back({Bytes{b}, topology_collective_time(truth, kind, Bytes{b}, ranks, nodes), false, 0});
  return s;
}

NcclTopology declared_ampere() {
  // An NVSwitch node without NVLS: Ampere, 8 GPUs; the NVLink bandwidth a first guess.
  NcclTopology t;
  t.arch = NcclArch::Ampere;
  t.gpus_per_node = 8;
  t.nvlink_busbw = Bandwidth::from_gbps(100);
  return t;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

}  // namespace

TEST_CASE("the fit recovers bandwidths and hop-latency scales from measurements the model itself produced",
          "[calibrate][topology]") {
  NcclTopology truth = declared_h100();
  truth.nvlink_busbw = Bandwidth::from_gbps(358);
  truth.nvls_bw = Bandwidth::from_gbps(308);
  truth.nic_bw = Bandwidth::from_gbps(48.9);
  truth.nvlink_latency_scale = 1.7;
  truth.net_latency_scale = 0.8;
  std::vector<CollectiveSeries> series = {
      synthetic(truth, CollectiveKind::AllGather, 8, 1), synthetic(truth, CollectiveKind::ReduceScatter, 4, 1),
      synthetic(truth, CollectiveKind::AllReduce, 8, 1), synthetic(truth, CollectiveKind::AllReduce, 10, 10),
      synthetic(truth, CollectiveKind::AllGather, 20, 10)};
  TopologyFitReport report;
  NcclTopology fit = fit_topology(declared_h100(), series, {}, report);
  // Every point is exactly the model's: the parameters come back (to rounding of 1 ns times).
  CHECK(fit.nvlink_busbw.gbps() == Approx(358).epsilon(1e-3));
  CHECK(fit.nvls_bw.gbps() == Approx(308).epsilon(1e-3));
  CHECK(fit.nic_bw.gbps() == Approx(48.9).epsilon(1e-3));
  CHECK(fit.nvlink_latency_scale == Approx(1.7).epsilon(1e-2));
  CHECK(fit.net_latency_scale == Approx(0.8).epsilon(1e-2));
  // The fitted range is the shapes seen: 4..20 ranks, 1..10 nodes, 1..8 GPUs per node.
  CHECK(fit.fitted.min_ranks == 4);
  CHECK(fit.fitted.max_ranks == 20);
  CHECK(fit.fitted.max_nodes == 10);
  CHECK(fit.fitted.min_gpus_per_node == 1);
  CHECK(fit.fitted.max_gpus_per_node == 8);
}

TEST_CASE("one group shape across nodes keeps the base's network latency scale and says so", "[calibrate][topology]") {
  // A 2-node log alone (the A100 OCI case): the network's hops are a constant of that shape, so
  // the fit keeps the declared scale instead of whatever the least squares give; a second
  // shape across nodes (another node count, or another number of GPUs per node) fits it.
  NcclTopology truth = declared_h100();
  truth.nvlink_busbw = Bandwidth::from_gbps(358);
  truth.nvls_bw = Bandwidth::from_gbps(308);
  truth.nic_bw = Bandwidth::from_gbps(48.9);
  truth.net_latency_scale = 0.4;
  NcclTopology base = declared_h100();
  base.net_latency_scale = 1.0;
  TopologyFitReport report;
  NcclTopology one = fit_topology(base, {synthetic(truth, CollectiveKind::AllReduce, 8, 1),
                                         synthetic(truth, CollectiveKind::AllReduce, 16, 2)}, {}, report);
  CHECK(one.net_latency_scale == 1.0);
  const LevelFit& net = report.levels[2];
  CHECK(net.level == "network");
  CHECK(net.fitted);
  CHECK(net.latency_scale < 0);  // not a parameter of this fit
  CHECK(net.note.find("latency scale kept from the base profile") != std::string::npos);
  NcclTopology two = fit_topology(base, {synthetic(truth, CollectiveKind::AllReduce, 8, 1),
                                         synthetic(truth, CollectiveKind::AllReduce, 16, 2),
                                         synthetic(truth, CollectiveKind::AllReduce, 32, 4)}, {}, report);
  CHECK(two.net_latency_scale == Approx(0.4).epsilon(0.02));
  CHECK(report.levels[2].note.empty());
  // A base that declares an oversubscribed spine refuses logs of jobs across it.
  base.leaf_nodes = 2;
  base.oversubscription = 2;
  CHECK_NOTHROW(fit_topology(base, {synthetic(truth, CollectiveKind::AllReduce, 16, 2)}, {}, report));
  CHECK_THROWS_WITH(fit_topology(base, {synthetic(truth, CollectiveKind::AllReduce, 32, 4)}, {}, report),
                    Catch::Contains("4 nodes cross the spine") && Catch::Contains("leaf_nodes 2"));
}

TEST_CASE("--local-pass recovers the local pass across group sizes; one group size leaves it out",
          "[calibrate][topology]") {
  const NcclTopology declared = declared_ampere();
  NcclTopology truth = declared;
  truth.nvlink_busbw = Bandwidth::from_gbps(232);
  truth.nvlink_latency_scale = 3.0;
  truth.nvlink_local_bw = Bandwidth::from_gbps(700);
  TopologyFitOptions o;
  o.fit_local_pass = true;
  o.min_bytes = 32 << 20;
  TopologyFitReport report;
  NcclTopology fit = fit_topology(declared,
                                  {synthetic(truth, CollectiveKind::AllReduce, 2, 1), synthetic(truth, CollectiveKind::AllReduce, 4, 1),
                                   synthetic(truth, CollectiveKind::AllReduce, 8, 1)},
                                  o, report);
  CHECK(fit.nvlink_busbw.gbps() == Approx(232).epsilon(1e-3));
  CHECK(fit.nvlink_local_bw.gbps() == Approx(700).epsilon(1e-2));
  CHECK(fit.nvlink_latency_scale == Approx(3.0).epsilon(2e-2));
  CHECK(report.levels[0].local_gbps == Approx(700).epsilon(1e-2));
  // One group size: S/n and the wire's S(n-1)/n are proportional, so there is no local pass to find.
  NcclTopology no_local = truth;
  no_local.nvlink_local_bw = Bandwidth{0};
  NcclTopology with_local = declared;  // a base that declares one is not kept either
  with_local.nvlink_local_bw = Bandwidth::from_gbps(700);
  NcclTopology one = fit_topology(with_local, {synthetic(no_local, CollectiveKind::AllReduce, 8, 1)}, o, report);
  CHECK(one.nvlink_local_bw.bytes_per_s == 0);
  CHECK(report.levels[0].local_gbps == 0);
  CHECK(one.nvlink_busbw.gbps() == Approx(232).epsilon(1e-3));
  // Without the option the term is not fitted (the profiles that do not declare it keep 0).
  NcclTopology off = fit_topology(declared, {synthetic(no_local, CollectiveKind::AllReduce, 4, 1)}, {}, report);
  CHECK(off.nvlink_local_bw.bytes_per_s == 0);
  CHECK(report.levels[0].local_gbps == -1);
}

TEST_CASE("--nvlink-bandwidth-ratio carries the fitted NVLink bandwidths to the profile's GPU, errors unchanged",
          "[calibrate][topology]") {
  const NcclTopology declared = declared_ampere();
  NcclTopology truth = declared;
  truth.nvlink_busbw = Bandwidth::from_gbps(231);
  std::vector<CollectiveSeries> series = {synthetic(truth, CollectiveKind::AllReduce, 8, 1),
                                          synthetic(truth, CollectiveKind::AllToAll, 8, 1)};
  TopologyFitReport same, scaled;
  NcclTopology a = fit_topology(declared, series, {}, same);
  TopologyFitOptions o;
  o.nvlink_bandwidth_ratio = 1.5;  // A100 (12 NVLinks) measured, A800 (8) predicted
  NcclTopology b = fit_topology(declared, series, o, scaled);
  CHECK(b.nvlink_busbw.gbps() == Approx(a.nvlink_busbw.gbps() / 1.5));
  CHECK(b.nvlink_all_to_all_busbw.gbps() == Approx(a.nvlink_all_to_all_busbw.gbps() / 1.5));
  CHECK(scaled.levels[0].measured_bandwidth_gbps == Approx(a.nvlink_busbw.gbps()));
  CHECK(scaled.levels[0].median_abs_error == same.levels[0].median_abs_error);
}

TEST_CASE("leave-one-out over the five h100-cluster01 logs: each predicted within 10 % median time error",
          "[calibrate][topology][slow-ish]") {
  // Issue 15 target: a profile fitted from four of the logs predicts the fifth's rows (all >= 32
  // MiB in these logs, both column groups) within 10 % median absolute time error. The table in
  // docs/collectives.md is printed by tools/collective_loo.sh from the same computation.
  std::vector<std::vector<CollectiveSeries>> logs;
  for (const char* f : kLogs) logs.push_back(import_collective_log(kCluster + f));
  for (std::size_t out = 0; out < logs.size(); ++out) {
    std::vector<CollectiveSeries> train;
    for (std::size_t i = 0; i < logs.size(); ++i)
      if (i != out) train.insert(train.end(), logs[i].begin(), logs[i].end());
    TopologyFitReport report;
    TopologyFitOptions o;
    o.fit_local_pass = true;  // as tools/fit_profiles.sh fits the shipped profile
    NcclTopology t = fit_topology(declared_h100(), train, o, report);
    std::vector<double> errs;
    for (const auto& s : logs[out]) {
      auto e = topology_errors(t, s, {});
      errs.insert(errs.end(), e.begin(), e.end());
    }
    INFO(kLogs[out] << ": median " << 100 * median(errs) << " %");
    CHECK(median(errs) <= 0.10);
  }
}
