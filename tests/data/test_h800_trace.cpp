// `analyze` on deepseek-ai/profile-data's H800 training trace (data/traces/deepseek-ai_profile-data,
// issue 47): DualPipe's overlapped forward and backward chunks of DeepSeek-V3 (EP64), whose
// communication is DeepEP's own kernels and whose GEMMs are FP8 grouped GEMMs.
//
// Expected counts from an independent Python scan of train.json (json + gzip): 963 CUDA kernels;
// 32 whose name holds "dpsk::ep::" other than get_dispatch_layout (8 combine, 12 cached_notify,
// 8 dispatch, 4 notify_dispatch); 140 whose name holds "fp8" and "GemmKernel"; 12 cuBLAS
// "xmma_gemm".
#include <catch2/catch.hpp>

#include "sim/analysis/class_breakdown.hpp"
#include "trace/trace_analysis.hpp"

using namespace stepsim;
using namespace stepsim::trace;

namespace {
const std::string kTrace = std::string(STEPSIM_TEST_DATA) + "/traces/deepseek-ai_profile-data/train.json.gz";

std::int64_t kernels_of(const ClassBreakdown& b, const std::string& cls) {
  for (const auto& r : b.rows)
    if (r.cls == cls) return r.kernels;
  return -1;
}
}  // namespace

// Catches: DeepEP's dispatch/combine kernels counted as compute (before issue 47 the step showed
// 128.5 ms of compute in a 112.2 ms step, no communication and no overlap), FP8 GEMMs or their
// layout kernels misclassified.
TEST_CASE("analyze reads the H800 DualPipe trace: DeepEP kernels are all-to-alls, FP8 GEMMs are GEMMs", "[trace][data]") {
  const KinetoTrace t = read_kineto_trace(kTrace);
  const TraceAnalysis a = analyze_trace(t, AnalyzeOptions{});
  REQUIRE(a.steps.size() == 1);
  CHECK(a.device == "NVIDIA H800");
  const StepAnalysis& s = a.steps[0];
  CHECK(s.collectives == 32);
  REQUIRE(a.collectives.size() == 32);
  for (const auto& c : a.collectives) CHECK(c.kind == TraceCollective::AllToAll);
  // 963 kernels less the 32 DeepEP ones.
  CHECK(s.classes.kernels() == 931);
  CHECK(kernels_of(s.classes, "gemm") >= 152);  // the 140 FP8 grouped GEMMs and 12 cuBLAS GEMMs
  // DualPipe hides nearly all of its communication behind the other chunk's compute.
  CHECK(s.metrics.overlap.comm_time.ns > 100'000'000);
  CHECK(s.metrics.overlap.overlap_pct > 90);
  for (std::size_t i = 0; i < t.gpu_ops.size(); ++i) {
    const std::string& name = t.name_of(t.gpu_ops[i]);
    if (name.find("fp8") != std::string::npos && name.find("GemmKernel") != std::string::npos)
      CHECK(trace_kernel_class(name) == KernelClass::Gemm);
    if (name.find("utils::transpose<") != std::string::npos) CHECK(trace_kernel_class(name) == KernelClass::Copy);
    if (name.find("get_dispatch_layout") != std::string::npos) CHECK_FALSE(t.gpu_ops[i].collective);
  }
}

TEST_CASE("DeepEP's communication kernels are recognised by name, in either namespace", "[trace]") {
  CHECK(is_deepep_comm_kernel_name("void deep_ep::internode::dispatch<false, 8, false, 8>(int4*, float*)"));
  CHECK(is_deepep_comm_kernel_name("void dpsk::ep::internode::combine<false, 8, __nv_bfloat16>(int4*)"));
  CHECK(is_deepep_comm_kernel_name("void deep_ep::intranode::notify_dispatch<8>(int const*)"));
  CHECK(is_deepep_comm_kernel_name("void deep_ep::internode_ll::dispatch<false, 3>(void*)"));
  CHECK_FALSE(is_deepep_comm_kernel_name("void dpsk::ep::cuda::get_dispatch_layout<256, 32, 8>(long const*)"));
  CHECK_FALSE(is_deepep_comm_kernel_name("void cuda::reduce_fused_impl<__nv_bfloat16>(int4 const*)"));
  CHECK(collective_from_kernel_name("void dpsk::ep::internode::cached_notify<false>(int)") == TraceCollective::AllToAll);
  CHECK(is_comm_kernel_name("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)"));
}
