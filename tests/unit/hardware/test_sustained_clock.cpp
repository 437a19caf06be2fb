// Power-limited sustained clocks (compute.clock, issue 47): a compute-bound kernel at fraction u
// of peak sustains min(boost, full_load x u^(-1/3)) and its rate scales by that clock / boost.
#include <catch2/catch.hpp>

#include <cmath>

#include "sim/core/error.hpp"
#include "sim/core/json_reader.hpp"
#include "sim/hardware/compute_model.hpp"
#include "sim/hardware/profile.hpp"
#include "sim/analysis/metrics.hpp"
#include "sim/analysis/run.hpp"
#include "sim/exec/engine.hpp"
#include "sim/strategies/load_experiment.hpp"

using namespace stepsim;

namespace {

ComputeProfile base() {
  ComputeProfile c;
  c.peak[Dtype::BF16] = FlopRate::from_tflops(1000);
  c.min_kernel_time = Time::zero();
  c.hbm = Bandwidth::from_gbps(1e6);  // memory-bound floors out of the way
  c.gemm_efficiency = 0.8;
  c.attention_efficiency = 0.4;
  return c;
}

// A 16384^3 GEMM: 2 x 2^42 FLOPs, compute-bound.
GemmShape big() { return GemmShape{16384, 16384, 16384, 1, Dtype::BF16}; }

}  // namespace

TEST_CASE("A power-limited clock lowers a kernel's clock by u^(-1/3) from its full-load value, never above boost",
          "[hardware][clock]") {
  ClockProfile k{1980, 700, 1500};
  // u = 1: the full-load clock. u = 0.8: 1500 x 1.25^(1/3) = 1615.7 MHz. u = 0.4: 1500 x 2.5^(1/3) =
  // 2035.8 > 1980: the boost clock.
  CHECK(k.factor(1.0) == Approx(1500.0 / 1980));
  CHECK(k.factor(0.8) == Approx(1500.0 * std::cbrt(1.25) / 1980));
  CHECK(k.factor(0.4) == 1.0);
  CHECK(ClockProfile{}.factor(0.8) == 1.0);  // no clock block: rates as measured
}

TEST_CASE("GEMMs and fused attention run at the sustained clock; memory-bound kernels do not", "[hardware][clock]") {
  ComputeProfile c = base();
  const Time gemm_boost = gemm_time(c, big());
  KernelSpec attn;
  attn.cls = KernelClass::Attention;
  attn.work.attention = AttentionWork{Flops{1e12}, AttentionKernel::Flash, false, 4096, 128};
  const Time attn_boost = kernel_time(c, attn);
  KernelSpec ew;
  ew.cls = KernelClass::Elementwise;
  ew.work.memory_bytes = Bytes{1 << 30};
  const Time ew_boost = kernel_time(c, ew);

  c.clock = ClockProfile{1980, 700, 1200};
  // Roofline GEMM at u = 0.8: 1200 x 1.25^(1/3) = 1292.7 MHz -> time x 1980 / 1292.7.
  const double gemm_f = 1200 * std::cbrt(1.25) / 1980;
  CHECK(static_cast<double>(gemm_time(c, big()).ns) == Approx(static_cast<double>(gemm_boost.ns) / gemm_f).epsilon(1e-6));
  // Attention at u = 0.4: 1200 x 2.5^(1/3) = 1628.7 MHz.
  const double attn_f = 1200 * std::cbrt(2.5) / 1980;
  CHECK(static_cast<double>(kernel_time(c, attn).ns) == Approx(static_cast<double>(attn_boost.ns) / attn_f).epsilon(1e-6));
  CHECK(kernel_time(c, ew) == ew_boost);

  // A table measured inside a step (fit --trace) carries the sustained clock already.
  c.gemm_table.push_back(GemmMeasurement{big(), FlopRate::from_tflops(700)});
  c.gemm_table_rates = GemmRates::InTraining;
  const Time in_training = gemm_time(c, big());
  c.clock = ClockProfile{};
  CHECK(gemm_time(c, big()) == in_training);
}

TEST_CASE("compute.clock is read, written back, and a full-load clock above boost is refused", "[hardware][clock]") {
  nlohmann::json doc{{"name", "clocked"},
                     {"memory_capacity_GiB", 80},
                     {"compute",
                      {{"peak_tflops", {{"bf16", 989.4}}},
                       {"hbm_bandwidth_GBps", 3350},
                       {"clock", {{"boost_MHz", 1980}, {"full_load_MHz", 1500}, {"power_limit_W", 700}}}}},
                     {"collectives", {{"intra_node", {{"model", "ring"}, {"busbw_GBps", 360}}}}}};
  auto parse = [](const nlohmann::json& d) {
    SourceMap sm;
    sm.root_file = "p.json";
    ObjectReader r(d, sm, "");
    return parse_profile(r);
  };
  const HardwareProfile h = parse(doc);
  CHECK(h.compute.clock.full_load_mhz == 1500);
  CHECK(h.compute.clock.power_limit_w == 700);
  CHECK(parse(profile_to_json(h)).compute.clock.boost_mhz == 1980);
  doc["compute"]["clock"]["full_load_MHz"] = 2100;
  CHECK_THROWS_WITH(parse(doc), Catch::Contains("/compute/clock/full_load_MHz") && Catch::Contains("at most boost_MHz"));
  doc["compute"]["clock"].erase("full_load_MHz");
  CHECK_THROWS_WITH(parse(doc), Catch::Contains("/compute/clock") && Catch::Contains("\"full_load_MHz\""));
}

// SharedProfile::gemm_time_memo: the GEMM times a profile that no one changes keeps across
// simulations (issue 49) are its own; a profile edited gets none, and prices its GEMMs again.
TEST_CASE("experiments of one profile file share its GEMM times; an edited profile is priced afresh", "[hardware][gemm]") {
  const std::string file = std::string(STEPSIM_SOURCE_DIR) + "/configs/examples/llama3-8b-ddp-8xh100.json";
  Experiment a = load_experiment(file);
  Experiment b = load_experiment(file);
  REQUIRE(a.cluster.profile.gemm_time_memo() != nullptr);
  CHECK(a.cluster.profile.gemm_time_memo() == b.cluster.profile.gemm_time_memo());
  const Time kept = run_experiment(a).metrics.overlap.step_time;
  CHECK(run_experiment(b).metrics.overlap.step_time == kept);  // from the memo a filled
  // The same program on a plain copy of the profile (no memo) gives the same step.
  const HardwareProfile copy = *a.cluster.profile;
  CHECK(compute_metrics(simulate_program(build_step_program(a), copy, a.training.allocator)).overlap.step_time == kept);

  for (auto& [dtype, rate] : b.cluster.profile.edit().compute.peak) rate.flops_per_s *= 2;
  CHECK(b.cluster.profile.gemm_time_memo() == nullptr);
  const Time faster = run_experiment(b).metrics.overlap.step_time;
  CHECK(faster < kept);
  HardwareProfile doubled = *a.cluster.profile;
  for (auto& [dtype, rate] : doubled.compute.peak) rate.flops_per_s *= 2;
  CHECK(compute_metrics(simulate_program(build_step_program(b), doubled, b.training.allocator)).overlap.step_time == faster);
  CHECK(run_experiment(a).metrics.overlap.step_time == kept);  // a's memo untouched by b's edit
}
