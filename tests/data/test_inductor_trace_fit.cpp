// The reductions torch.compile generates (issue 47): `fit --trace` on modded-nanogpt's H100 trace
// (data/traces/modded-nanogpt) measures Inductor's Triton reductions apart from aten's kernel
// classes, and the shipped H100 profile's compute.memory_bandwidth_GBps.inductor_reduction is
// that measurement.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>

#include "calibrate/from_trace/trace_fit.hpp"
#include "sim/hardware/profile.hpp"
#include "test_support.hpp"
#include "trace/kineto_trace.hpp"

using namespace stepsim;

namespace {

const std::string kTrace = std::string(STEPSIM_TEST_DATA) +
                           "/traces/modded-nanogpt/2025-10-31_AdamSyncGradientHook__modded-nanogpt-current-gpu-rank-00-chrome-trace.json.gz";

}  // namespace

TEST_CASE("Inductor's launches name their Triton kernel; their traffic is their arguments, each moved once", "[trace][compile]") {
  CHECK(trace::is_inductor_kernel_name("triton_poi_fused_embedding_0"));
  CHECK(trace::is_inductor_reduction_name("triton_per_fused__fused_rms_norm_0"));
  CHECK(trace::is_inductor_reduction_name("triton_red_fused__log_softmax_0"));
  CHECK_FALSE(trace::is_inductor_reduction_name("triton_poi_fused_embedding_0"));
  CHECK_FALSE(trace::is_inductor_kernel_name("triton_tem_fused_mm_0"));  // a GEMM template, not memory-bound
  CHECK(trace::is_memory_bound_op_name("triton_red_fused__log_softmax_0"));
  // [32768, 768] bf16 in, [32768, 768] bf16 out, [32768, 1] fp32 rstd, a scalar.
  const auto t = trace::memory_op_traffic("triton_per_fused__fused_rms_norm_0", {{32768, 768}, {32768, 768}, {32768, 1}, {}},
                                          {"c10::BFloat16", "c10::BFloat16", "float", "Scalar"});
  REQUIRE(t);
  CHECK(t->bytes == 2 * 32768 * 768 * 2 + 32768 * 4);
  CHECK(t->largest == 32768 * 768 * 2);
  // Shapes no real tensor has (a fuzzed trace): 64 arguments of 2^57 fp64 elements say nothing.
  const std::vector<std::vector<std::int64_t>> huge(64, std::vector<std::int64_t>{std::int64_t{1} << 57});
  CHECK_FALSE(trace::memory_op_traffic("triton_poi_fused_add_0", huge, std::vector<std::string_view>(64, "double")));
}

TEST_CASE("fit --trace on modded-nanogpt's H100 trace measures Inductor's reductions, kept out of aten's classes, and "
          "reproduces the shipped inductor_reduction",
          "[fit][trace][compile][data]") {
  const trace::TraceFitData d = trace::extract_fit_data({trace::read_kineto_trace(kTrace)}, trace::AnalyzeOptions{});
  CHECK(d.inductor_reductions.size() > 300);
  // Inductor's kernels count in no aten class: the trace's few aten reductions and norms stay
  // below the fit's minimum.
  for (const auto& m : d.memory_classes)
    if (m.cls == KernelClass::Norm || m.cls == KernelClass::Reduction) CHECK(m.count < 8);
  const std::string base = std::string(STEPSIM_SOURCE_DIR) + "/configs/hardware/h100-sxm-8x.json";
  const test::TempDir dir;
  const std::string out_file = dir.file("h100-fitted.json");
  std::string out;
  const int rc = test::run_capture(std::string(STEPSIM_BINARY) + " fit --trace " + kTrace + " --trace-assumed-groups --base " + base +
                                       " --out " + out_file,
                                   out);
  INFO(out);
  REQUIRE(rc == 0);
  CHECK(out.find("inductor_reduction 2551.4 (2551.0)") != std::string::npos);
  const nlohmann::json fitted = nlohmann::json::parse(std::ifstream(out_file));
  CHECK(fitted["provenance"]["trace_compute"]["memory_bandwidth_GBps"]["inductor_reduction"]["kernels"] == 268);
  const HardwareProfile shipped = load_profile(base);
  CHECK(shipped.compute.inductor_reduction.gbps() == Approx(fitted["compute"]["memory_bandwidth_GBps"]["inductor_reduction"].get<double>()).epsilon(0.0005));
}
