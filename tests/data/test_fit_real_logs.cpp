// Fitting on the real measurements in data/: every measured point is reproduced within
// the error the fit reports (and the report is computed from the data), the written profile
// loads and the simulator's collective model reproduces the points, and a fit on one log
// predicts another log of the same hardware family.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include "calibrate/fit/profile_fit.hpp"
#include "calibrate/importers/nccl_tests_log.hpp"
#include "calibrate/importers/xla_tables.hpp"
#include "sim/hardware/collective_model.hpp"
#include "sim/hardware/profile.hpp"
#include "test_support.hpp"

using namespace stepsim;
using namespace stepsim::calib;

namespace {
const std::string kData = STEPSIM_TEST_DATA;
const std::string kNccl = kData + "/nccl-tests/";

// The H100 profile without its topology model: these tests hold the alpha-beta ranges, which a
// fit over a topology base may only write for both scopes (test_collectives_at_scale.cpp holds
// the topology fit).
HardwareProfile base_profile() {
  HardwareProfile p = load_profile(std::string(STEPSIM_SOURCE_DIR) + "/configs/hardware/h100-sxm-8x.json");
  p.topology.reset();
  return p;
}

// The alpha-beta fit of one measured series (both in- and out-of-place samples).
KindFit fit_of(const CollectiveSeries& series) {
  KindFit f;
  f.kind = series.kind;
  f.ranks = series.ranks;
  f.points = fit_points(series, SampleSelection::Both);
  f.ranges = fit_ranges(f.points);
  return f;
}

// Checks the busbw `f` predicts for every out-of-place sample of `measured` at >= 64 MiB against
// the measured busbw (within 10 %); returns how many samples were checked.
int check_busbw_at_64mib_and_up(const KindFit& f, const CollectiveSeries& measured) {
  int checked = 0;
  for (const auto& s : measured.samples) {
    if (s.in_place || s.bytes < Bytes::from_mib(64)) continue;
    double meas = busbw_gbps(measured.kind, measured.ranks, s.bytes, s.time);
    double pred = predict_busbw_gbps(f, static_cast<double>(s.bytes.count), measured.ranks);
    INFO("S=" << s.bytes.count << " measured " << meas << " predicted " << pred);
    CHECK(std::abs(pred - meas) / meas <= 0.10);
    ++checked;
  }
  return checked;
}

// Fits `in` on the H100 base profile, writes the profile as `stepsim fit` does and loads it back
// (so the checks see the JSON round trip a user's file goes through).
HardwareProfile fit_write_and_load(const FitInputs& in, FitReport& report, const std::string& file_name) {
  HardwareProfile p = fit_profile(base_profile(), in, FitOptions{}, report);
  const test::TempDir dir;
  auto path = dir / file_name;
  {
    std::ofstream out(path);
    out << fitted_profile_to_json(p, report).dump(2);
  }
  return load_profile(path);
}

std::vector<std::string> all_logs() {
  return {"allgather_2x8xH100_GCP-A3High-TCPX_dstack.txt",
          "allgather_2x8xH100_GCP-A3Mega-TCPXO_dstack.txt",
          "allreduce_1x8xA100-SXM4-40GB_Galvatron-test-fixture.txt",
          "allreduce_2x8xA100-SXM4-40GB_OCI-RoCE.txt",
          "allreduce_2x8xB200_GCP-A4-RoCE_dstack.txt",
          "allreduce_2x8xH100_GCP-A3Mega-TCPXO.txt",
          "allreduce_2x8xH100_Nebius-IB_dstack.txt",
          "allreduce_4xA100-DGX_4xH100-DGX_NVLink-vs-noP2P_LLM-Insights.txt",
          "allreduce_A40_NVLink-vs-PCIe_SYS_NODE_LLM-Insights.txt",
          "torch_allreduce_bench_8xH200_ml-engineering.md"};
}

// The range the simulator (and predict_us) uses for S.
const LineFit& range_for(const std::vector<LineFit>& ranges, double bytes) {
  for (const auto& r : ranges)
    if (bytes <= r.max_bytes) return r;
  return ranges.back();
}
}  // namespace

TEST_CASE("every point of every real log is reproduced within the error its range reports", "[data][fit]") {
  int checked = 0;
  for (const auto& name : all_logs()) {
    for (const auto& series : import_collective_log(kNccl + name)) {
      auto pts = fit_points(series, SampleSelection::Both);
      auto ranges = fit_ranges(pts);
      for (const auto& p : pts) {
        const LineFit& r = range_for(ranges, p.bytes);
        double err = std::abs(r.predict_us(p.bytes) - p.time_us) / p.time_us;
        INFO(name << " " << series.label << " S=" << p.bytes);
        CHECK(err <= r.max_rel_error + 1e-12);
        ++checked;
      }
      // The reported worst error is attained by some point: it is computed, not a bound.
      for (const auto& r : ranges) {
        double worst = 0;
        for (const auto& p : pts)
          if (p.bytes >= r.min_bytes && p.bytes <= r.max_bytes)
            worst = std::max(worst, std::abs(r.predict_us(p.bytes) - p.time_us) / p.time_us);
        CHECK(worst == Approx(r.max_rel_error).epsilon(1e-12));
      }
    }
  }
  // Points per file: AG TCPX 22, AG TCPXO 22, Galvatron 22, OCI 62, B200 22, A3Mega 62,
  // Nebius 62, DGX 4 runs x 8 = 32, A40 3 runs x 8 = 24, H200 markdown 20: 350.
  CHECK(checked == 350);
}

TEST_CASE("perturbing one measured point changes the reported error of its range accordingly", "[data][fit]") {
  auto series = import_collective_log(kNccl + "allreduce_1x8xA100-SXM4-40GB_Galvatron-test-fixture.txt").at(0);
  auto pts = fit_points(series, SampleSelection::OutOfPlace);
  auto before = fit_ranges(pts, RangeFitOptions{0.05, 1, 2});  // one range over 1 MiB .. 1 GiB
  REQUIRE(before.size() == 1);
  pts[4].time_us *= 3.0;  // 16 MiB now takes 3x as long
  auto after = fit_ranges(pts, RangeFitOptions{0.05, 1, 2});
  double pred = after[0].predict_us(pts[4].bytes);
  // That point's own residual is at least what the report says is the worst, so the report
  // moved with the data: it must equal the recomputed worst residual and exceed the old one.
  double worst = 0;
  for (const auto& p : pts) worst = std::max(worst, std::abs(after[0].predict_us(p.bytes) - p.time_us) / p.time_us);
  CHECK(after[0].max_rel_error == Approx(worst).epsilon(1e-12));
  CHECK(after[0].max_rel_error > before[0].max_rel_error);
  CHECK(std::abs(pred - pts[4].time_us) / pts[4].time_us <= after[0].max_rel_error + 1e-12);
  CHECK(after[0].r2 < before[0].r2);
}

TEST_CASE("a profile fitted from the A100 logs loads and the simulator's model reproduces the points",
          "[data][fit]") {
  FitInputs in;
  for (const char* f : {"allreduce_1x8xA100-SXM4-40GB_Galvatron-test-fixture.txt", "allreduce_2x8xA100-SXM4-40GB_OCI-RoCE.txt"}) {
    auto s = import_collective_log(kNccl + f);
    in.collectives.insert(in.collectives.end(), s.begin(), s.end());
  }
  FitReport report;
  HardwareProfile loaded = fit_write_and_load(in, report, "stepsim_test_fit_a100.json");
  REQUIRE(std::holds_alternative<AlphaBetaModel>(loaded.intra_node));
  CHECK(std::holds_alternative<AlphaBetaModel>(loaded.inter_node));
  // Derived kinds are present for the simulator.
  CHECK(std::get<AlphaBetaModel>(loaded.intra_node).ranges.count(CollectiveKind::AllGather) == 1);
  CHECK(std::get<AlphaBetaModel>(loaded.intra_node).ranges.count(CollectiveKind::ReduceScatter) == 1);
  int checked = 0;
  for (const auto& f : report.fits) {
    if (!f.in_profile || f.derived_from) continue;
    const ScopeModel& m = f.scope == "intra_node" ? loaded.intra_node : loaded.inter_node;
    for (const auto& pt : f.points) {
      double t = static_cast<double>(scope_collective_time(m, f.kind, Bytes{static_cast<std::int64_t>(pt.bytes)}, f.ranks, f.nodes).ns) / 1e3;
      double reported = range_for(f.ranges, pt.bytes).max_rel_error;
      // JSON round trip and integer-ns rounding add at most ~2 ns.
      CHECK(std::abs(t - pt.time_us) / pt.time_us <= reported + 2e-3 / pt.time_us + 1e-9);
      ++checked;
    }
  }
  CHECK(checked == 22 + 62);
  REQUIRE(loaded.provenance.contains("collective_fits"));
}

TEST_CASE("busbw predicted from the 8xA100 fit is within 10% of the 4xA100 DGX log at >= 64 MiB", "[data][fit]") {
  // Fit: Galvatron's 1 node x 8 A100-SXM4-40GB all_reduce, 1 MiB .. 1 GiB.
  // Check: LLM-Insights DGX A100 (4 of 8 A100, NVSwitch), run 1, out-of-place busbw 1 .. 8 GiB.
  // busbw carries across group sizes (C6.1), so the 8-rank fit predicts the 4-rank run.
  auto fit_series = import_collective_log(kNccl + "allreduce_1x8xA100-SXM4-40GB_Galvatron-test-fixture.txt").at(0);
  KindFit f = fit_of(fit_series);
  auto measured = import_collective_log(kNccl + "allreduce_4xA100-DGX_4xH100-DGX_NVLink-vs-noP2P_LLM-Insights.txt").at(0);
  CHECK(check_busbw_at_64mib_and_up(f, measured) == 4);
}

TEST_CASE("busbw predicted from XLA's 8xH100 table is within 10% of the 4xH100 DGX log at >= 64 MiB", "[data][fit]") {
  auto xla = import_xla_collectives(kData + "/xla_perf_tables/collective_perf_table.csv", "sm_90");
  auto series = std::find_if(xla.begin(), xla.end(),
                             [](const CollectiveSeries& s) { return s.kind == CollectiveKind::AllReduce && s.ranks == 8; });
  REQUIRE(series != xla.end());
  KindFit f = fit_of(*series);
  REQUIRE(f.points.size() == 22);
  auto measured = import_collective_log(kNccl + "allreduce_4xA100-DGX_4xH100-DGX_NVLink-vs-noP2P_LLM-Insights.txt").at(2);
  CHECK(check_busbw_at_64mib_and_up(f, measured) == 4);
}

TEST_CASE("XLA's 8xH100 table: every measured group size (8, 4, 2) goes into the profile and is reproduced",
          "[data][fit]") {
  FitInputs in;
  in.collectives = import_xla_collectives(kData + "/xla_perf_tables/collective_perf_table.csv", "sm_90");
  FitReport report;
  HardwareProfile loaded = fit_write_and_load(in, report, "stepsim_test_fit_h100_groups.json");
  REQUIRE(std::holds_alternative<AlphaBetaModel>(loaded.intra_node));
  const AlphaBetaModel& m = std::get<AlphaBetaModel>(loaded.intra_node);
  REQUIRE(m.ranks.at(CollectiveKind::AllReduce) == 8);
  REQUIRE(m.groups.at(CollectiveKind::AllReduce).size() == 2);
  CHECK(m.groups.at(CollectiveKind::AllReduce).count(2) == 1);
  CHECK(m.groups.at(CollectiveKind::AllReduce).count(4) == 1);
  // A 2-rank all-reduce is priced from the 2-rank measurements, not rescaled from 8 ranks:
  // every measured point within the error the 2-rank fit reports for its range.
  std::map<int, int> checked;
  for (const auto& f : report.fits) {
    if (!f.in_profile || f.derived_from || f.scope != "intra_node") continue;
    for (const auto& pt : f.points) {
      double t = static_cast<double>(scope_collective_time(m, f.kind, Bytes{static_cast<std::int64_t>(pt.bytes)}, f.ranks, 1).ns) / 1e3;
      double reported = range_for(f.ranges, pt.bytes).max_rel_error;
      INFO(to_string(f.kind) << " on " << f.ranks << " ranks, S=" << pt.bytes << ": model " << t << " us, measured " << pt.time_us);
      CHECK(std::abs(t - pt.time_us) / pt.time_us <= reported + 2e-3 / pt.time_us + 1e-9);
      ++checked[f.ranks];
    }
  }
  CHECK(checked[8] == 4 * 22);  // all-reduce, all-gather, reduce-scatter, all-to-all
  CHECK(checked[4] == 4 * 22);
  CHECK(checked[2] == 4 * 22);
}
