// GEMM times kept across simulations (GemmTimeMemo) and the table they are priced from
// (GemmTable): the same time with and without them, and a full memo that keeps the newest shapes.
#include <catch2/catch.hpp>

#include "sim/hardware/compute_model.hpp"

using namespace stepsim;

namespace {

ComputeProfile with_table() {
  ComputeProfile c;
  c.peak[Dtype::BF16] = FlopRate::from_tflops(1000);
  c.min_kernel_time = Time::zero();
  c.hbm = Bandwidth::from_gbps(1e6);  // no memory-bound floor
  // Five entries around (m, n, k) = (4096, 4096, 4096): a lookup between them weighs the four
  // nearest, so the farthest one changes nothing unless it is (wrongly) counted.
  const std::int64_t sizes[][3] = {{2048, 4096, 4096}, {8192, 4096, 4096}, {4096, 2048, 4096}, {4096, 8192, 4096}, {65536, 65536, 65536}};
  double rate = 400;
  for (const auto& s : sizes) {
    c.gemm_table.push_back(GemmMeasurement{GemmShape{s[0], s[1], s[2], 1, Dtype::BF16}, FlopRate::from_tflops(rate)});
    rate += 100;
  }
  return c;
}

GemmShape shape(std::int64_t m) { return GemmShape{m, 4096, 4096, 1, Dtype::BF16}; }

Kernel gemm_kernel(const KernelWork& w) { return Kernel{.cls = KernelClass::Gemm, .work = &w}; }

}  // namespace

TEST_CASE("A GEMM between table entries gets the inverse-distance mean of the four nearest", "[hardware][gemm]") {
  const ComputeProfile c = with_table();
  const GemmShape g = shape(4096);  // distance 1 (log2) from each of the four near entries
  const double eff = (0.4 + 0.5 + 0.6 + 0.7) / 4;
  CHECK(gemm_time(c, g).seconds() == Approx(g.flops().count / (1000e12 * eff)).epsilon(1e-5));  // whole ns
  const GemmTable table(c);
  CHECK(gemm_time(c, g, table) == gemm_time(c, g));
}

TEST_CASE("A simulation's GEMM times are the same with the profile's memo and table as without", "[hardware][gemm]") {
  const ComputeProfile c = with_table();
  GemmTimeMemo memo(c);
  KernelTimeCache shared(c, &memo), alone(c);
  for (std::int64_t m : {512, 3000, 4096, 12288, 100000}) {
    KernelWork w;
    w.gemms.push_back(shape(m));
    CHECK(shared.kernel_time(gemm_kernel(w)) == kernel_time(c, gemm_kernel(w)));
    CHECK(alone.kernel_time(gemm_kernel(w)) == kernel_time(c, gemm_kernel(w)));
    CHECK(memo.find(shape(m)) == gemm_time(c, shape(m)));
  }
  // Another profile object is not the memo's: its simulations work out their own table.
  ComputeProfile other = with_table();
  other.gemm_table.back().rate = FlopRate::from_tflops(100);
  CHECK(memo.table_for(c) != nullptr);
  CHECK(memo.table_for(other) == nullptr);
}

TEST_CASE("A full GEMM memo starts again, keeping the shapes met since", "[hardware][gemm]") {
  const ComputeProfile c = with_table();
  GemmTimeMemo memo(c);
  const std::int64_t first = 64, past_full = 64 + 4096;  // the memo holds 4,096 shapes
  for (std::int64_t m = first; m <= past_full; ++m) memo.add(shape(m), Time{m});
  CHECK(memo.find(shape(past_full)) == Time{past_full});  // a full memo stopped adding here
  CHECK_FALSE(memo.find(shape(first)).has_value());
  memo.add(shape(first), Time{first});
  CHECK(memo.find(shape(first)) == Time{first});
  CHECK(memo.find(shape(past_full)) == Time{past_full});
}
