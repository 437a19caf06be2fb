// Ranks are not identical (issue 46, docs/scale.md): a collective starts when the slowest of its
// communicator's ranks arrives; the expected wait is E[max of N normals] times the spread the
// ranks accumulated since they last met.
#include <catch2/catch.hpp>

#include <cmath>

#include "sim/exec/engine.hpp"
#include "sim/exec/expected_max.hpp"
#include "test_support.hpp"

using namespace stepsim;
using stepsim::test::fixed_kernel;
using stepsim::test::ideal_profile;

namespace {
const TimelineOp& op_named(const Timeline& t, const std::string& name) {
  for (const auto& op : t.ops)
    if (op.name == name) return op;
  FAIL("no op named " << name);
  return t.ops.front();
}
Time wait_of(const Timeline& t, const std::string& name) {
  for (std::size_t i = 0; i < t.ops.size(); ++i)
    if (t.ops[i].name == name) return t.rank_wait.at(i);
  FAIL("no op named " << name);
  return Time::zero();
}

HardwareProfile varied_profile(double kernel_cv, double persistent_cv) {
  HardwareProfile hw = ideal_profile();
  hw.rank_variation.kernel_cv[static_cast<std::size_t>(fixed_kernel("k", Time::from_ms(1)).cls)] = kernel_cv;
  hw.rank_variation.persistent_cv = persistent_cv;
  return hw;
}

// Two kernels (3 and 4 ms), an all-reduce of the 8-rank communicator, one more kernel (2 ms), a
// second all-reduce.
Program two_segments(int ranks) {
  ProgramBuilder b;
  auto pg = b.comm("pg", ranks, 1);
  b.launch(StreamId{0}, fixed_kernel("k1", Time::from_ms(3)));
  b.launch(StreamId{0}, fixed_kernel("k2", Time::from_ms(4)));
  b.collective(pg, StreamId{0}, CollectiveKind::AllReduce, Bytes{1'000'000}, Dtype::BF16, "AR1");
  b.launch(StreamId{0}, fixed_kernel("k3", Time::from_ms(2)));
  b.collective(pg, StreamId{0}, CollectiveKind::AllReduce, Bytes{1'000'000}, Dtype::BF16, "AR2");
  return b.take();
}
}  // namespace

TEST_CASE("The expected maximum of N standard normal draws", "[engine][ranks]") {
  CHECK(expected_max_of_normals(1) == 0);
  CHECK(expected_max_of_normals(2) == Approx(1 / std::sqrt(M_PI)).epsilon(1e-5));  // 0.5642
  CHECK(expected_max_of_normals(8) == Approx(1.4236).epsilon(1e-4));                // tabulated (Harter 1961)
  CHECK(expected_max_of_normals(100) == Approx(2.5076).epsilon(1e-4));
  CHECK(expected_max_of_normals(1024) > expected_max_of_normals(128));
}

TEST_CASE("The build's table of the expected maximum holds the integral bit for bit, and the run-time path beyond it "
          "computes the same integral", "[engine][ranks]") {
  // The midpoint rule as the engine computed it per n before the table.
  auto direct = [](int n) {
    constexpr double h = 1e-3;
    double e = 0;
    for (double x = -9 + h / 2; x < 9; x += h) {
      const double cdf_n = std::pow(0.5 * std::erfc(-x / std::sqrt(2.0)), n);
      e += (x >= 0 ? 1.0 - cdf_n : -cdf_n) * h;
    }
    return e;
  };
  const expected_max::CdfGrid grid = expected_max::normal_cdf_grid();
  for (int n : {2, 3, 7, 8, 16, 100, 128, 1000, 1024, 4095, 4096}) {
    CAPTURE(n);
    CHECK(kExpectedMaxTable[n] == direct(n));
    CHECK(expected_max_of_normals(n) == direct(n));
    CHECK(expected_max::integral(grid, n) == direct(n));
  }
  CHECK(kExpectedMaxTableSize == 4097);
  CHECK(expected_max_of_normals(4097) == direct(4097));  // computed at run time
  CHECK(expected_max_of_normals(4097) > expected_max_of_normals(4096));
}

TEST_CASE("A collective waits for the slowest rank: E[max of N] x the spread since the ranks last met", "[engine][ranks]") {
  const double cv = 0.02;
  const Timeline t = simulate_program(two_segments(8), varied_profile(cv, 0));
  // Independent per kernel: sigma = cv x sqrt(3^2 + 4^2) ms = 0.1 ms before AR1.
  const double e8 = expected_max_of_normals(8);
  CHECK(wait_of(t, "AR1").ns == std::llround(e8 * cv * 5e6));
  // The NCCL kernel of the rank that arrived first spans the wait, as in a real trace: it starts
  // when k2 ends and ends a wait plus its transfer later.
  CHECK(op_named(t, "AR1").start == op_named(t, "k2").end);
  const Time transfer = simulate_program(two_segments(8), ideal_profile()).ops[2].end - Time::from_ms(7);
  CHECK(op_named(t, "AR1").end - op_named(t, "AR1").start == transfer + wait_of(t, "AR1"));
  // The ranks leave a collective together: before AR2 only k3's spread counts.
  CHECK(wait_of(t, "AR2").ns == std::llround(e8 * cv * 2e6));
  // Kernels do not wait.
  CHECK(wait_of(t, "k1") == Time::zero());
}

TEST_CASE("A rank's persistent speed offset grows with the time since the ranks met; more ranks wait longer", "[engine][ranks]") {
  const double pcv = 0.01;
  const Timeline t8 = simulate_program(two_segments(8), varied_profile(0, pcv));
  CHECK(wait_of(t8, "AR1").ns == std::llround(expected_max_of_normals(8) * pcv * 7e6));  // 3 + 4 ms held together
  const Timeline t128 = simulate_program(two_segments(128), varied_profile(0, pcv));
  CHECK(wait_of(t128, "AR1") > wait_of(t8, "AR1"));
  CHECK(t128.end > t8.end);
  // One rank alone waits for nobody; a profile without rank_variation keeps no waits at all.
  const Timeline t1 = simulate_program(two_segments(1), varied_profile(0, pcv));
  CHECK(wait_of(t1, "AR1") == Time::zero());
  CHECK(simulate_program(two_segments(8), ideal_profile()).rank_wait.empty());
}

TEST_CASE("Sampled waits: one draw of the slowest rank per collective, reproducible by seed", "[engine][ranks]") {
  const HardwareProfile hw = varied_profile(0.02, 0.005);
  const Timeline a = simulate_program(two_segments(64), hw, {}, RankOptions{true, 1});
  const Timeline b = simulate_program(two_segments(64), hw, {}, RankOptions{true, 1});
  CHECK(a.end == b.end);
  // Over many seeds the mean sampled step approaches the expected-value step.
  const Time expected = simulate_program(two_segments(64), hw).end;
  double sum = 0;
  bool differs = false;
  const int n = 400;
  for (int s = 0; s < n; ++s) {
    const Time end = simulate_program(two_segments(64), hw, {}, RankOptions{true, static_cast<std::uint64_t>(s + 2)}).end;
    sum += static_cast<double>(end.ns);
    differs = differs || end != a.end;
  }
  CHECK(differs);
  CHECK(sum / n == Approx(static_cast<double>(expected.ns)).epsilon(0.002));
}
