// Calibration data from traces (`fit --trace`): collective points and compute timings.

#include <catch2/catch.hpp>

#include "calibrate/from_trace/trace_fit.hpp"

using namespace stepsim;
using namespace stepsim::trace;

namespace {
const std::string kTraces = std::string(STEPSIM_SHARED_DATA) + "/traces/";
}

TEST_CASE("Kernel names map to compute classes", "[trace][fit]") {
  CHECK(kernel_class_of("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_nn") == "gemm");
  CHECK(kernel_class_of("sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x32") == "gemm");
  CHECK(kernel_class_of("void cutlass::Kernel<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn_align8>") == "gemm");
  CHECK(kernel_class_of("sm70_xmma_fprop_implicit_gemm_f32f32_f32f32_f32_nhwckrsc_nchw") == "conv");
  CHECK(kernel_class_of("flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4>>") == "attention");
  CHECK(kernel_class_of("void multi_tensor_apply_kernel<TensorListMetadata<4>, AdamFunctor<float>>") == "optimizer");
  CHECK(kernel_class_of("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>") == "elementwise");
  CHECK(kernel_class_of("ncclDevKernel_AllGather_RING_LL(x)") == "collective");
}

TEST_CASE("fit data from ZeRO-1: bucket all-reduce points with S per nccl-tests, GEMMs below peak", "[trace][fit][data]") {
  auto t = read_kineto_trace(kTraces + "li-plus_playground/zero1__rank_0__n122-248-036_415351.1703670656319922979.pt.trace.json.gz");
  TraceFitData d = extract_fit_data({t}, AnalyzeOptions{});
  // 10 all-reduces + 4 all-gathers in steps 11-12; all have sizes (nccl:* Input Dims).
  CHECK(d.collectives.size() == 14);
  CHECK(d.skipped_collectives == 0);
  for (const auto& p : d.collectives) {
    CHECK(p.ranks == 8);
    CHECK(p.ranks_assumed);  // this PyTorch version did not record the group size
  }
  // Only assumed groups: nothing unless asked for.
  CHECK(collective_table(d, false).empty());
  auto table = collective_table(d, true);
  REQUIRE(table.count(CollectiveKind::AllReduce));
  const auto& ar = table.at(CollectiveKind::AllReduce).at(8);
  // Buckets from nccl:all_reduce Input Dims x bf16: 336187392, 486539264, 493031424 elements
  // x 2 B, plus the 1-element fp32 all-reduce (4 B); sorted by bytes, one median per size.
  REQUIRE(ar.size() == 4);
  CHECK(ar[0].bytes == Bytes{4});
  CHECK(ar[1].bytes == Bytes{672374784});
  CHECK(ar[2].bytes == Bytes{973078528});
  CHECK(ar[3].bytes == Bytes{986062848});
  // All-gather S = gathered output = shard 164389376 x 2 B x 8 ranks.
  const auto& ag = table.at(CollectiveKind::AllGather).at(8);
  CHECK(ag.back().bytes == Bytes{2630230016});

  REQUIRE_FALSE(d.gemms.empty());
  for (const auto& g : d.gemms) {
    INFO(g.shape.m << "x" << g.shape.n << "x" << g.shape.k << " b" << g.shape.batch);
    // A800 dense BF16 peak is 312 TFLOP/s (FP32 19.5): no measured GEMM can beat it.
    CHECK(g.rate.tflops() < 312.0);
    CHECK(g.rate.tflops() > 0.0);
  }
  CHECK(gemm_table(d).size() == d.gemms.size());
  bool has_gemm_class = false;
  for (const auto& k : d.kernel_classes) has_gemm_class = has_gemm_class || (k.cls == "gemm" && k.count > 0);
  CHECK(has_gemm_class);
}

TEST_CASE("fit data uses the recorded group size when the trace has it", "[trace][fit][data]") {
  auto t = read_kineto_trace(kTraces + "hta/nccl_parser_config__nccl_data.json.gz");
  TraceFitData d = extract_fit_data({t}, AnalyzeOptions{});
  auto table = collective_table(d, false);
  REQUIRE(table.count(CollectiveKind::AllReduce));
  REQUIRE(table.at(CollectiveKind::AllReduce).count(2));
  // 5 all-reduces per step over 3 steps; 2 broadcasts per step.
  std::size_t ar = 0, bc = 0;
  for (const auto& p : d.collectives) {
    CHECK_FALSE(p.ranks_assumed);
    ar += p.kind == CollectiveKind::AllReduce ? 1 : 0;
    bc += p.kind == CollectiveKind::Broadcast ? 1 : 0;
  }
  CHECK(ar == 15);
  CHECK(bc == 6);
}

TEST_CASE("Kernel names map to the simulator's kernel classes for the per-class breakdown", "[trace][fit]") {
  CHECK(trace_kernel_class("ampere_bf16_s16816gemm_bf16_128x256_ldg8_f2f_stages_64x3_nt") == KernelClass::Gemm);
  CHECK(trace_kernel_class("void flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits>") == KernelClass::Attention);
  CHECK(trace_kernel_class("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>>") ==
        KernelClass::Elementwise);
  // TensorIterator's non-vectorized path (broadcast / strided / casting operands).
  CHECK(trace_kernel_class("void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl<direct_copy_kernel_cuda>>") ==
        KernelClass::ElementwiseStrided);
  CHECK(trace_kernel_class("void (anonymous namespace)::softmax_warp_forward<c10::BFloat16, c10::BFloat16, float, 9>") ==
        KernelClass::Reduction);
  CHECK(trace_kernel_class("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>") ==
        KernelClass::Norm);
  CHECK(trace_kernel_class("void cuApplyLayerNorm<c10::BFloat16, float, c10::BFloat16>") == KernelClass::Norm);
  CHECK(trace_kernel_class("void at::native::(anonymous namespace)::indexSelectLargeIndex<c10::BFloat16, long>") ==
        KernelClass::Embedding);
  CHECK(trace_kernel_class("void multi_tensor_apply_kernel<TensorListMetadata<4>, AdamFunctor<float>>") == KernelClass::Optimizer);
  CHECK(trace_kernel_class("void at::native::(anonymous namespace)::CatArrayBatchedCopy<c10::BFloat16>") == KernelClass::Copy);
  // aten::cumsum's scan (OPT's position ids) is a reduction-like pass; the cub scans inside
  // embedding_dense_backward stay embedding.
  CHECK(trace_kernel_class("void at::native::tensor_kernel_scan_innermost_dim<long, std::plus<long> >(long*, long const*)") ==
        KernelClass::Reduction);
  CHECK(trace_kernel_class("void at_cuda_detail::cub::DeviceScanKernel<at_cuda_detail::cub::DeviceScanPolicy<long>::Policy600>") ==
        KernelClass::Embedding);
}

TEST_CASE("fit --trace leaves the host-synchronised scalar all-reduce out and measures eager dispatch", "[trace][fit][data]") {
  auto t = read_kineto_trace(kTraces + "li-plus_playground/zero1__rank_0__n122-248-036_415351.1703670656319922979.pt.trace.json.gz");
  TraceFitData d = extract_fit_data({t}, AnalyzeOptions{});
  // Two steps x two 4-byte fp32 all-reduces (grad norm, overflow check): the only scalar ones.
  int scalar = 0;
  for (const auto& p : d.collectives) {
    CHECK(p.host_synchronised == (p.bytes.count <= 8));
    scalar += p.host_synchronised;
  }
  CHECK(scalar == 4);
  // The launch spacing of an eager step: the forward (Python) thread issues an op every tens of
  // microseconds, the autograd thread faster; a launch call itself takes a few.
  CHECK(d.host.forward_launches > 1000);
  CHECK(d.host.backward_launches > 1000);
  CHECK(d.host.eager_op > Time::from_us(10));
  CHECK(d.host.eager_op < Time::from_us(500));
  CHECK(d.host.autograd_op > Time::from_us(5));
  CHECK(d.host.kernel_launch > Time::zero());
  CHECK(d.host.kernel_launch < d.host.eager_op);
  // The training loop around the framework: DeepSpeed-Chat's dataloader and input copies before
  // the first GPU op (the inputs' H2D copy, ~0.4 ms into the step), and after the last kernel
  // its print_throughput (a parameter count in Python) and tensorboard writes (~3.2 ms).
  CHECK(d.host.steps == 2);
  CHECK(d.host.step_start > Time::from_us(200));
  CHECK(d.host.step_start < Time::from_us(1000));
  CHECK(d.host.step_end > Time::from_us(2500));
  CHECK(d.host.step_end < Time::from_us(4000));
}
