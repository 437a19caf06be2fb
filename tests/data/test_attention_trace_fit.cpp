// The fused attention kernels' rates (issue 13, items 3 and 6): `fit --trace` measures the
// FlashAttention-2 forward and backward kernels of the li-plus Megatron trace, and the shipped A800
// profile's compute.attention.flash is that measurement carried to long sequences.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "calibrate/from_trace/trace_fit.hpp"
#include "sim/hardware/compute_model.hpp"
#include "sim/hardware/profile.hpp"
#include "test_support.hpp"
#include "trace/kineto_trace.hpp"

using namespace stepsim;

namespace {

std::string megatron_rank0() {
  namespace fs = std::filesystem;
  for (const auto& e : fs::directory_iterator(std::string(STEPSIM_TEST_DATA) + "/traces/li-plus_playground"))
    if (e.path().filename().string().rfind("megatron__rank_0__", 0) == 0) return e.path().string();
  return {};
}

}  // namespace

TEST_CASE("the Megatron trace's FlashAttention-2 kernels: shape, causality and rate per direction", "[fit][trace][attention]") {
  const std::string file = megatron_rank0();
  REQUIRE(!file.empty());
  const trace::TraceFitData d = trace::extract_fit_data({trace::read_kineto_trace(file)}, trace::AnalyzeOptions{});
  REQUIRE(d.attention.size() == 2);
  const trace::AttentionPoint& f = d.attention[0];
  const trace::AttentionPoint& b = d.attention[1];
  CHECK(f.kernel == AttentionKernel::Flash);
  CHECK_FALSE(f.backward);
  CHECK(b.backward);
  // FlashAttnVarlenFunc q [32768, 8, 64] with cu_seqlens [33]: 32 sequences of 1,024, 8 heads of 64.
  CHECK(f.batch == 32);
  CHECK(f.seq == 1024);
  CHECK(f.hidden == 512);
  CHECK(f.head_dim == 64);  // FlashAttention-2's 64-wide kernel: executed FLOPs are the model's
  CHECK(b.head_dim == 64);
  CHECK(b.batch == 32);  // the backward node records only dO: b from the forward of the same q
  // flash_fwd_kernel<traits, Is_dropout=true, Is_causal=true, ...>
  CHECK(f.causal);
  CHECK_FALSE(f.causal_assumed);
  CHECK(f.count == 24);
  CHECK(b.count == 24);
  // Medians 302.0 us (forward kernel) and 877.5 us (dot_do_o + dq_dk_dv loop + convert_dq).
  CHECK(f.median.us() == Approx(302.0).epsilon(0.005));
  CHECK(b.median.us() == Approx(877.5).epsilon(0.005));
  CHECK(f.rate.tflops() / 312.0 == Approx(0.3647).epsilon(0.005));
  CHECK(b.rate.tflops() / 312.0 == Approx(0.3139).epsilon(0.005));
}

TEST_CASE("fit --trace on the Megatron trace reproduces the shipped A800 flash attention rate", "[fit][trace][attention]") {
  const std::string file = megatron_rank0();
  REQUIRE(!file.empty());
  const std::string base = std::string(STEPSIM_SOURCE_DIR) + "/configs/hardware/a800-sxm-8x.json";
  const test::TempDir dir;
  const std::string out_file = dir.file("a800-fitted.json");
  std::string out;
  const int rc = test::run_capture(std::string(STEPSIM_BINARY) + " fit --trace " + file + " --base " + base + " --out " + out_file, out);
  INFO(out);
  REQUIRE(rc == 0);
  // The shipped A800 rates came from this trace: the base prices the kernel as measured.
  CHECK(out.find("attention flash: forward 0.365, backward 0.314 of peak at sequence 1024 (causal; the base profile's there "
                 "0.365 / 0.314)") != std::string::npos);
  const HardwareProfile fitted = load_profile(out_file);
  const HardwareProfile shipped = load_profile(base);
  const auto& fr = fitted.compute.attention_rates[static_cast<std::size_t>(AttentionKernel::Flash)];
  const auto& sr = shipped.compute.attention_rates[static_cast<std::size_t>(AttentionKernel::Flash)];
  REQUIRE(fr);
  REQUIRE(sr);
  // The provenance says at which head width the rate was measured.
  CHECK(nlohmann::json::parse(std::ifstream(out_file))["provenance"]["trace_compute"]["attention"]["flash"]["head_dim"] == 64);
  CHECK(fr->half_rate_seq == sr->half_rate_seq);  // kept from the base
  CHECK(fr->forward == Approx(sr->forward).epsilon(0.002));
  CHECK(fr->backward == Approx(sr->backward).epsilon(0.002));
  // At the trace's sequence length the shipped rate is the measured one.
  CHECK(attention_efficiency(shipped.compute, AttentionWork{Flops{1}, AttentionKernel::Flash, false, 1024}) ==
        Approx(0.3647).epsilon(0.005));
  CHECK(attention_efficiency(shipped.compute, AttentionWork{Flops{1}, AttentionKernel::Flash, true, 1024}) ==
        Approx(0.3139).epsilon(0.005));
  // The GEMM table from a trace is this part's: no power-variant scaling.
  CHECK(fitted.compute.gemm_table_peak.flops_per_s == 0);
}

TEST_CASE("The shipped FlashAttention-2 rates against Azure's runs of flash-attention's benchmark", "[attention][data]") {
  // data/azure_ai_benchmarking_guide: benchmark_flash_attention.py forward + backward, causal,
  // batch 2, sequence 8192, FLOPs 3.5 x 4 b s^2 h / 2 (the causal count stepsim uses).
  auto combined_tflops = [](const HardwareProfile& p, std::int64_t seq) {
    const double f = attention_efficiency(p.compute, AttentionWork{Flops{1}, AttentionKernel::Flash, false, seq});
    const double b = attention_efficiency(p.compute, AttentionWork{Flops{1}, AttentionKernel::Flash, true, seq});
    return 3.5 / (1.0 / f + 2.5 / b) * p.compute.peak.at(Dtype::BF16).tflops();
  };
  // A100 80GB (ND A100 v4, head dim 64): 179.5 TFLOPS. The A100 profile's rates come from the A800
  // Megatron trace at sequence 1,024 and the FlashAttention-2 paper's maximum: an independent check.
  const HardwareProfile a100 = load_profile(std::string(STEPSIM_SOURCE_DIR) + "/configs/hardware/a100-sxm-8x.json");
  CHECK(combined_tflops(a100, 8192) == Approx(179.5).epsilon(0.02));
  // H100 80GB HBM3 (ND H100 v5, head dim 128): 327.9 TFLOPS, the measurement the H100 rate is taken from.
  const HardwareProfile h100 = load_profile(std::string(STEPSIM_SOURCE_DIR) + "/configs/hardware/h100-sxm-8x.json");
  CHECK(combined_tflops(h100, 8192) == Approx(327.9).epsilon(0.005));
}
