// Calibration data from traces (`fit --trace`): collective points and compute timings.

#include <algorithm>
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "calibrate/from_trace/trace_fit.hpp"

using namespace stepsim;
using namespace stepsim::trace;

namespace {
const std::string kTraces = std::string(STEPSIM_TEST_DATA) + "/traces/";

// A host cost `fit --trace` measured lands in the profile (HostProfile::*cost), in
// provenance.trace_compute.KEY and as the source of host.KEY; one it did not measure (`none`)
// leaves the base profile's value.
void check_host_cost_applied(const TraceFitData& d, const TraceFitData& none, Time HostProfile::*cost,
                             const std::string& key, Time expected) {
  HardwareProfile p;
  nlohmann::json prov;
  apply_trace_compute(d, ComputeProfile(p.compute), p, prov);
  CHECK(p.host.*cost == expected);
  CHECK(prov["trace_compute"][key] == expected.us());
  CHECK(p.sources.contains("host." + key));
  HardwareProfile q;
  q.host.*cost = Time::from_us(123);
  nlohmann::json prov2;
  apply_trace_compute(none, ComputeProfile(q.compute), q, prov2);
  CHECK(q.host.*cost == Time::from_us(123));
}
}

TEST_CASE("Kernel names map to compute classes", "[trace][fit]") {
  CHECK(kernel_class_of("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_nn") == "gemm");
  CHECK(kernel_class_of("sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x32") == "gemm");
  CHECK(kernel_class_of("void cutlass::Kernel<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn_align8>") == "gemm");
  CHECK(kernel_class_of("sm70_xmma_fprop_implicit_gemm_f32f32_f32f32_f32_nhwckrsc_nchw") == "conv");
  CHECK(kernel_class_of("flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4>>") == "attention");
  // sdpa's cuDNN backend: an attention kernel, though cuDNN's name would say conv.
  CHECK(kernel_class_of("cudnn_generated_fort_native_sdpa_sm90_knob_7_64x128x128_4x1x1_kernel0_0") == "attention");
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
  CHECK(trace_kernel_class("cudnn_generated_fort_native_sdpa_sm90_knob_7_64x128x128_4x1x1_kernel0_0") == KernelClass::Attention);
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
  // cuBLAS's Hopper kernels (the modded-nanogpt H100 traces' aten::mm, bmm, _scaled_mm) and
  // modded-nanogpt's Triton matmuls: GEMMs, where they used to fall through to compute.
  CHECK(trace_kernel_class("nvjet_tst_256x128_64x4_1x2_h_bz_coopA_NNT") == KernelClass::Gemm);
  CHECK(trace_kernel_class("nvjet_qqtst_192x192_128x4_1x2_h_bz_coopB_TNN") == KernelClass::Gemm);
  CHECK(trace_kernel_class("XXT_kernel") == KernelClass::Gemm);
  CHECK(trace_kernel_class("ba_plus_cAA_kernel") == KernelClass::Gemm);
  // The H800 step's kernels named for their work (deepseek-ai/profile-data).
  CHECK(trace_kernel_class("rotary_kernel") == KernelClass::Elementwise);
  CHECK(trace_kernel_class("void cuda::swiglu_backward<__nv_bfloat16>(void const*, void const*, void*, int, int)") == KernelClass::Elementwise);
  CHECK(trace_kernel_class("void at::native::sbtopk::gatherTopK<float, unsigned int, 2, false>(at::cuda::detail::TensorInfo<float, unsigned int>)") ==
        KernelClass::Reduction);
  CHECK(trace_kernel_class("_copy_tensor_kernel") == KernelClass::Copy);
  // Only the names: a kernel that merely mentions them is not taken for one.
  CHECK(trace_kernel_class("my_nvjet_helper") == KernelClass::Compute);
  // Inductor's kernels are named after the ops they fuse (data/traces/modded-nanogpt): the
  // attention gate's backward is no attention kernel, relu's backward no reduction; a generated
  // reduction still is one, and its norms norms.
  CHECK(trace_kernel_class("triton_per_fused__flash_attn_backward__unsafe_view_mul_sigmoid_sigmoid_backward_sum_view_8") ==
        KernelClass::Elementwise);
  CHECK(trace_kernel_class("triton_poi_fused__unsafe_view_mul_nll_loss_forward_pow_relu_threshold_backward_view_5") ==
        KernelClass::Elementwise);
  CHECK(trace_kernel_class("triton_red_fused__log_softmax_div_mul_prepare_softmax_online_sigmoid_view_31") == KernelClass::Reduction);
  CHECK(trace_kernel_class("triton_per_fused__fused_rms_norm__unsafe_view_add_12") == KernelClass::Norm);
  CHECK(trace_kernel_class("triton_poi_fused_embedding_dense_backward_45") == KernelClass::Embedding);
  // A kernel of attention's own, whatever else is in its name, still is one.
  CHECK(trace_kernel_class("void cutlass::device_kernel<flash::FlashAttnBwdPreprocess<cute::tuple<cute::C<64>>>>") ==
        KernelClass::Attention);
  CHECK(trace_kernel_class("XXT_kernel_prep") == KernelClass::Compute);
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
  // What they were made of, as analyze --idle lists them (the mean of the two steps), and where
  // the profile records it.
  REQUIRE_FALSE(d.host.step_start_frames.empty());
  CHECK(d.host.step_start_frames[0].name == "torch/utils/data/dataloader.py(625): __next__");
  CHECK(d.host.step_start_frames[0].total == Time::from_us(327));
  REQUIRE(d.host.step_end_frames.size() >= 2);
  CHECK(d.host.step_end_frames[0].name == "dschat/utils/perf.py(10): print_throughput");
  CHECK(d.host.step_end_frames[0].total == Time::from_us(2175));
  {
    HardwareProfile p;
    nlohmann::json provenance;
    apply_trace_compute(d, ComputeProfile(p.compute), p, provenance);
    const nlohmann::json& tail = provenance.at("trace_compute").at("step_end_frames");
    REQUIRE(tail.size() == std::min<std::size_t>(5, d.host.step_end_frames.size()));
    CHECK(tail[0].at("name") == "dschat/utils/perf.py(10): print_throughput");
    CHECK(tail[0].at("per_step_us").get<double>() == Approx(2175));
  }
  // DeepSpeed's tensorboard monitor (run_1.3b.sh --enable_tensorboard): write_events at
  // engine.backward and engine.step in each step, 0.36-0.97 ms under the Python tracer.
  CHECK(d.host.monitor_writes == 4);
  CHECK(d.host.monitor_write > Time::from_us(300));
  CHECK(d.host.monitor_write < Time::from_us(1000));
  // One loss.backward() per step: 1,700 nodes, the first run 0.77 and 1.03 ms after run_backward.
  CHECK(d.host.backward_calls == 2);
  CHECK(d.host.autograd_engine_per_node > Time::from_ns(400));
  CHECK(d.host.autograd_engine_per_node < Time::from_ns(650));
}

// Catches: the engine's start taken from outside the call, per call instead of per node, nodes
// outside the call counted, a mean instead of the median, calls outside the selected steps.
TEST_CASE("fit --trace measures the autograd engine's start per graph node from run_backward spans", "[trace][fit][host]") {
  std::string ev;
  auto x = [&](const std::string& cat, const std::string& name, int tid, int ts, int dur) {
    ev += fmt::format(R"({{"ph": "X", "cat": "{}", "name": "{}", "pid": 1, "tid": {}, "ts": {}, "dur": {}}},)", cat, name, tid, ts, dur);
  };
  const std::string rb = "<built-in method run_backward of torch._C._EngineBase object at 0x7f380f1d8bf0>";
  x("user_annotation", "ProfilerStep#1", 1, 0, 10000);
  x("user_annotation", "ProfilerStep#2", 1, 10000, 10000);
  x("user_annotation", "ProfilerStep#3", 1, 20000, 10000);
  // Step 1: 4 nodes on the engine's thread, the first 400 us in: 100 us a node.
  x("python_function", rb, 1, 1000, 2000);
  for (int i = 0; i < 4; ++i) x("cpu_op", "autograd::engine::evaluate_function: MmBackward0", 2, 1400 + 100 * i, 50);
  x("cpu_op", "autograd::engine::evaluate_function: MmBackward0", 2, 3500, 50);  // after the call
  // Step 2: 2 nodes, the first 600 us in: 300 us a node. Step 3: 1 node, 50 us.
  x("python_function", rb, 1, 11000, 2000);
  for (int i = 0; i < 2; ++i) x("cpu_op", "autograd::engine::evaluate_function: AddBackward0", 2, 11600 + 100 * i, 50);
  x("python_function", rb, 1, 21000, 2000);
  x("cpu_op", "autograd::engine::evaluate_function: AddBackward0", 2, 21050, 50);
  const KinetoTrace t = read_kineto_trace_text(
      R"({"traceEvents": [)" + ev + R"({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1000, "dur": 10, "args": {"device": 0, "stream": 7}}]})",
      "engine.json");
  const TraceFitData d = extract_fit_data({t}, AnalyzeOptions{});
  CHECK(d.host.backward_calls == 3);
  CHECK(d.host.autograd_engine_per_node == Time::from_us(100));  // median of 100, 300, 50
  AnalyzeOptions steps12;
  steps12.last_step = 2;
  CHECK(extract_fit_data({t}, steps12).host.autograd_engine_per_node == Time::from_us(200));
  // No backward call in the selected steps (a trace without Python stacks alike): nothing measured.
  AnalyzeOptions after;
  after.first_step = 4;
  const TraceFitData none = extract_fit_data({t}, after);
  CHECK(none.host.backward_calls == 0);
  check_host_cost_applied(d, none, &HostProfile::autograd_engine_per_node, "autograd_engine_per_node_us", Time::from_us(100));
}

// Catches: a monitor write taken from the wrong Python function, from outside the selected
// steps, or as a mean instead of the median; and a profile without the key.
TEST_CASE("fit --trace measures DeepSpeed's monitor write from the Python tracer's write_events spans", "[trace][fit][monitor]") {
  auto py = [](const std::string& name, int ts, int dur) {
    return fmt::format(R"({{"ph": "X", "cat": "python_function", "name": "{}", "pid": 1, "tid": 1, "ts": {}, "dur": {}}},)", name, ts, dur);
  };
  const std::string w = "/usr/lib/python3/dist-packages/deepspeed/monitor/monitor.py(46): write_events";
  const std::string text = std::string(R"({"traceEvents": [)") +
                           R"({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 10000},)" +
                           R"({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#2", "pid": 1, "tid": 1, "ts": 10000, "dur": 10000},)" +
                           py(w, 100, 900) + py(w, 5000, 300) + py(w, 12000, 400) + py(w, 25000, 5000) +
                           py("deepspeed/monitor/tensorboard.py(47): write_events", 101, 890) +
                           py("torch/utils/tensorboard/writer.py(344): add_scalar", 102, 200) +
                           R"({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1000, "dur": 10, "args": {"device": 0, "stream": 7}}]})";
  const KinetoTrace t = read_kineto_trace_text(text, "monitor.json");
  CHECK(std::count_if(t.cpu.begin(), t.cpu.end(), [](const CpuSpan& s) { return s.kind == CpuSpan::Kind::MonitorWrite; }) == 4);
  const TraceFitData d = extract_fit_data({t}, AnalyzeOptions{});
  CHECK(d.host.monitor_writes == 3);  // the one after the last step is outside every step
  CHECK(d.host.monitor_write == Time::from_us(400));
  // A trace without Python stacks: nothing measured, the base profile's value stays.
  AnalyzeOptions only2;
  only2.first_step = 3;
  const TraceFitData none = extract_fit_data({t}, only2);
  CHECK(none.host.monitor_writes == 0);
  check_host_cost_applied(d, none, &HostProfile::monitor_write, "monitor_write_us", Time::from_us(400));
}

// Catches: a class bandwidth fitted from the wrong bytes (a bool output counted as bf16, an
// in-place op's target not counted as written, a copy's destination counted as read).
TEST_CASE("A memory-bound op's traffic follows from its recorded shapes and types", "[trace][fit]") {
  using Dims = std::vector<std::vector<std::int64_t>>;
  using Types = std::vector<std::string_view>;
  const std::int64_t n = 8 * 32 * 512 * 512;
  // OPT's clamp backward: eq(bf16 scores, 0-dim float) reads both, writes a bool of the scores' shape.
  CHECK(memory_op_bytes("aten::eq", Dims{{8, 32, 512, 512}, {}}, Types{"c10::BFloat16", "float"}) == 2 * n + 4 + n);
  // The broadcast mask add: the [8, 1, 512, 512] mask is read once, the output has the scores' shape.
  CHECK(memory_op_bytes("aten::add", Dims{{8, 32, 512, 512}, {8, 1, 512, 512}, {}},
                        Types{"c10::BFloat16", "c10::BFloat16", "Scalar"}) == 2 * n + 2 * (n / 32) + 2 * n);
  // In place: the target is read and written.
  CHECK(memory_op_bytes("aten::add_", Dims{{1024}, {1024}, {}}, Types{"float", "c10::BFloat16", "Scalar"}) ==
        4096 + 2048 + 4096);
  // copy_ writes its destination and reads its source; fill_ only writes.
  CHECK(memory_op_bytes("aten::copy_", Dims{{2048}, {2048}, {}}, Types{"c10::BFloat16", "float", "Scalar"}) == 4096 + 8192);
  CHECK(memory_op_bytes("aten::fill_", Dims{{100}, {}}, Types{"float", "Scalar"}) == 400);
  // Dropout writes its output and a bool mask; its backward reads the gradient and the mask.
  CHECK(memory_op_bytes("aten::native_dropout", Dims{{10}, {}, {}}, Types{"c10::BFloat16", "Scalar", "Scalar"}) == 20 + 20 + 10);
  CHECK(memory_op_bytes("aten::native_dropout_backward", Dims{{10}, {10}, {}}, Types{"c10::BFloat16", "bool", "Scalar"}) ==
        20 + 10 + 20);
  // Softmax writes a tensor like its input; its backward reads two and writes one; sums write
  // a reduced tensor (not counted).
  CHECK(memory_op_bytes("aten::_softmax", Dims{{4, 8}, {}, {}}, Types{"c10::BFloat16", "Scalar", "Scalar"}) == 128);
  CHECK(memory_op_bytes("aten::_softmax_backward_data", Dims{{4, 8}, {4, 8}, {}, {}},
                        Types{"c10::BFloat16", "c10::BFloat16", "Scalar", "Scalar"}) == 192);
  CHECK(memory_op_bytes("aten::sum", Dims{{4096, 2048}, {}, {}, {}}, Types{"c10::BFloat16", "ScalarList", "Scalar", ""}) ==
        4096 * 2048 * 2);
  // The elements each kernel computes: the broadcast output's (a comparison's bool output is as
  // many elements as a bf16 one), an in-place op's target, a copy's destination, a sum's input.
  CHECK(memory_op_traffic("aten::eq", Dims{{8, 32, 512, 512}, {}}, Types{"c10::BFloat16", "float"})->elements == n);
  CHECK(memory_op_traffic("aten::add", Dims{{8, 32, 512, 512}, {8, 1, 512, 512}, {}},
                          Types{"c10::BFloat16", "c10::BFloat16", "Scalar"})->elements == n);
  CHECK(memory_op_traffic("aten::add_", Dims{{1024}, {1024}, {}}, Types{"float", "c10::BFloat16", "Scalar"})->elements == 1024);
  CHECK(memory_op_traffic("aten::copy_", Dims{{2048}, {2048}, {}}, Types{"c10::BFloat16", "float", "Scalar"})->elements == 2048);
  CHECK(memory_op_traffic("aten::sum", Dims{{4096, 2048}, {}, {}, {}}, Types{"c10::BFloat16", "ScalarList", "Scalar", ""})->elements ==
        4096 * 2048);
  CHECK(memory_op_traffic("aten::eq", Dims{{8, 32, 512, 512}, {}}, Types{"c10::BFloat16", "float"})->bytes ==
        *memory_op_bytes("aten::eq", Dims{{8, 32, 512, 512}, {}}, Types{"c10::BFloat16", "float"}));
  // An out= destination (HTA's A100 trace: aten::mul of [4, 2798, 2798] fp32 by a double 0-dim
  // tensor into a third tensor, 145 us) is written, not read: 8 bytes per element, 1.7 TB/s,
  // where reading it too would make 12 and 2.6 TB/s, over the 2,039 GB/s HBM peak.
  const std::int64_t m = 4LL * 2798 * 2798;
  const auto mul_out = memory_op_traffic("aten::mul", Dims{{4, 2798, 2798}, {}, {4, 2798, 2798}}, Types{"float", "double", "float"});
  CHECK(mul_out->bytes == 8 * m + 8);
  CHECK(mul_out->elements == m);
  CHECK(*memory_op_bytes("aten::neg", Dims{{1024}, {1024}}, Types{"c10::BFloat16", "c10::BFloat16"}) == 4096);
  CHECK(*memory_op_bytes("aten::lt", Dims{{64}, {64}, {64}}, Types{"float", "float", "bool"}) == 64 * 9);
  // Not an out=: the op's own tensors (add's two and alpha; where's three; an in-place target).
  CHECK(*memory_op_bytes("aten::mul", Dims{{64}, {64}}, Types{"float", "float"}) == 64 * 12);
  CHECK(*memory_op_bytes("aten::where", Dims{{64}, {64}, {64}}, Types{"bool", "float", "float"}) == 64 * 13);
  CHECK(*memory_op_bytes("aten::mul_", Dims{{64}, {64}}, Types{"float", "float"}) == 64 * 12);
  // Casting: tensor inputs of two dtypes (a bool mask or condition is not one; copy_ converts in
  // its functor; spellings of one dtype are one dtype).
  CHECK(memory_op_traffic("aten::eq", Dims{{8, 32, 512, 512}, {}}, Types{"c10::BFloat16", "float"})->casts);
  CHECK(memory_op_traffic("aten::add_", Dims{{1024}, {1024}, {}}, Types{"float", "c10::BFloat16", "Scalar"})->casts);
  CHECK_FALSE(memory_op_traffic("aten::add", Dims{{8, 32, 512, 512}, {8, 1, 512, 512}, {}},
                                Types{"c10::BFloat16", "c10::BFloat16", "Scalar"})->casts);
  CHECK_FALSE(memory_op_traffic("aten::add", Dims{{64}, {64}}, Types{"c10::BFloat16", "bf16"})->casts);
  CHECK_FALSE(memory_op_traffic("aten::masked_fill_", Dims{{64}, {64}, {}}, Types{"c10::BFloat16", "bool", "Scalar"})->casts);
  CHECK_FALSE(memory_op_traffic("aten::copy_", Dims{{2048}, {2048}, {}}, Types{"c10::BFloat16", "float", "Scalar"})->casts);
  // What the shapes cannot say: no op of the list, no tensor, an unknown dtype, ragged args.
  CHECK_FALSE(memory_op_bytes("aten::mm", Dims{{2, 2}, {2, 2}}, Types{"float", "float"}));
  CHECK_FALSE(memory_op_bytes("aten::add", Dims{{}, {}}, Types{"Scalar", "Scalar"}));
  CHECK_FALSE(memory_op_bytes("aten::add", Dims{{4}, {4}}, Types{"c10::complex<float>", "float"}));
  CHECK_FALSE(memory_op_bytes("aten::add", Dims{{4}}, Types{"float", "float"}));
  CHECK_FALSE(memory_op_bytes("aten::add", Dims{{1LL << 40, 1LL << 40}, {1}}, Types{"float", "float"}));  // no overflow
  CHECK_FALSE(memory_op_bytes("aten::add", Dims{{-1}, {1}}, Types{"float", "float"}));
  CHECK(is_memory_bound_op_name("aten::masked_fill_"));
  CHECK(is_memory_bound_op_name("aten::threshold_backward"));
  CHECK_FALSE(is_memory_bound_op_name("aten::index_select"));
  CHECK_FALSE(is_memory_bound_op_name("add_"));
}

namespace {
// A step of one thread launching kernels from aten ops with recorded shapes (Kineto layout).
std::string memory_trace(bool nccl_beside) {
  std::string ev = R"({"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 10000},)";
  auto op = [&](const std::string& name, int ts, int dur, const std::string& dims, const std::string& types) {
    ev += R"({"ph": "X", "cat": "cpu_op", "name": ")" + name + R"(", "pid": 1, "tid": 1, "ts": )" + std::to_string(ts) +
          R"(, "dur": )" + std::to_string(dur) + R"(, "args": {"Input Dims": )" + dims + R"(, "Input type": )" + types + "}},";
  };
  int corr = 1;
  auto kernel = [&](const std::string& name, int launch, int ts, int dur) {
    ev += R"({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": )" +
          std::to_string(launch) + R"(, "dur": 2, "args": {"correlation": )" + std::to_string(corr) + "}},";
    ev += R"({"ph": "X", "cat": "kernel", "name": ")" + name + R"(", "pid": 0, "tid": 7, "ts": )" + std::to_string(ts) +
          R"(, "dur": )" + std::to_string(dur) + R"(, "args": {"device": 0, "stream": 7, "correlation": )" +
          std::to_string(corr) + "}},";
    ++corr;
  };
  const std::string vec = "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>";
  // Ten adds of 2 x 1 MiB fp32 into a third (3 MiB each, 50 us): elementwise at 3 MiB / 50 us.
  for (int i = 0; i < 10; ++i) {
    op("aten::add", 100 * i + 10, 20, "[[262144], [262144], []]", R"(["float", "float", "Scalar"])");
    kernel(vec, 100 * i + 15, 2000 + 100 * i, 50);
  }
  // The softmax backward's nested mul is the mul's; the warp kernel left is the softmax's own.
  op("aten::_softmax_backward_data", 1200, 40, "[[262144], [262144], [], []]", R"(["float", "float", "Scalar", "Scalar"])");
  op("aten::mul", 1205, 10, "[[262144], [262144]]", R"(["float", "float"])");
  kernel(vec, 1207, 3100, 40);
  kernel("void (anonymous namespace)::softmax_warp_backward<float, float, float, 10, false>", 1220, 3200, 60);
  // Too short to measure bandwidth, and an op launching two kernels of its own: left out.
  op("aten::add", 1300, 10, "[[1024], [1024], []]", R"(["float", "float", "Scalar"])");
  kernel(vec, 1305, 3300, 5);
  op("aten::copy_", 1400, 30, "[[262144], [262144], []]", R"(["float", "float", "Scalar"])");
  kernel(vec, 1405, 3400, 30);
  kernel(vec, 1410, 3450, 30);
  if (nccl_beside)
    ev += R"j({"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)", "pid": 0, "tid": 9, "ts": 1990, "dur": 300, "args": {"device": 0, "stream": 9}},)j";
  ev.pop_back();
  return R"({"traceEvents": [)" + ev + "]}";
}
}  // namespace

// Catches: a kernel counted for an op that launched others too, for an outer op instead of the
// nested one that launched it, beside NCCL, or too short to say anything about bandwidth.
TEST_CASE("fit --trace measures each memory-bound class as bytes over time of the kernels an op launched alone",
          "[trace][fit]") {
  const TraceFitData d = extract_fit_data({read_kineto_trace_text(memory_trace(false), "memory.json")}, AnalyzeOptions{});
  std::map<KernelClass, MemoryClassPoint> by;
  for (const auto& m : d.memory_classes) by[m.cls] = m;
  REQUIRE(by.count(KernelClass::Elementwise));
  REQUIRE(by.count(KernelClass::Reduction));
  // Elementwise: the ten adds and the nested mul (3 MiB each); not the short add, not the copy's two.
  CHECK(by[KernelClass::Elementwise].count == 11);
  CHECK(by[KernelClass::Elementwise].bytes == Bytes{11 * 3 * 1048576});
  CHECK(by[KernelClass::Elementwise].time == Time::from_ns(10 * 50000 + 40000));
  // The softmax backward's warp kernel: reads two tensors, writes one (3 MiB) in 60 us.
  CHECK(by[KernelClass::Reduction].count == 1);
  CHECK(by[KernelClass::Reduction].rate.gbps() == Approx(3.0 * 1048576 / 60e-6 / 1e9));
  // Into the profile: 11 kernels and 0.54 ms, below the 1 ms a class needs: nothing set.
  HardwareProfile p;
  nlohmann::json prov;
  apply_trace_compute(d, ComputeProfile(p.compute), p, prov);
  CHECK(p.compute.class_bandwidth.empty());
  // Beside an NCCL kernel (the first two adds): left out, as contention is fitted apart.
  const TraceFitData beside = extract_fit_data({read_kineto_trace_text(memory_trace(true), "memory.json")}, AnalyzeOptions{});
  for (const auto& m : beside.memory_classes)
    if (m.cls == KernelClass::Elementwise) CHECK(m.count == 8);
}

namespace {
// sdpa on Hopper with its flash and its cuDNN backend: `calls` forward and backward calls of each
// over q = [2, 32, 4096, 128] (the backward's first input is the gradient, of q's shape). Kernel
// times: flash 2,000 / 5,000 us, cuDNN 1,100 / 2,900 us.
std::string sdpa_backends_trace(int calls) {
  std::string ev = R"({"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 400000},)";
  int corr = 1, ts = 10;
  const std::string q = "[2, 32, 4096, 128]";
  auto launch = [&](const std::string& op, const std::string& kernel, int dur) {
    ev += R"({"ph": "X", "cat": "cpu_op", "name": ")" + op + R"(", "pid": 1, "tid": 1, "ts": )" + std::to_string(ts) +
          R"(, "dur": 20, "args": {"Input Dims": [)" + q + ", " + q + ", " + q + R"(, []]}},)";
    ev += R"({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": )" + std::to_string(ts + 5) +
          R"(, "dur": 2, "args": {"correlation": )" + std::to_string(corr) + "}},";
    ev += R"({"ph": "X", "cat": "kernel", "name": ")" + kernel + R"(", "pid": 0, "tid": 7, "ts": )" + std::to_string(ts + 50) +
          R"(, "dur": )" + std::to_string(dur) + R"(, "args": {"device": 0, "stream": 7, "correlation": )" + std::to_string(corr) +
          "}},";
    ++corr;
    ts += dur + 100;
  };
  for (int i = 0; i < calls; ++i) {
    launch("aten::_scaled_dot_product_flash_attention",
           "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t>, false, true, false, false, false, true, false, false>(pytorch_flash::Flash_fwd_params)",
           2000);
    launch("aten::_scaled_dot_product_flash_attention_backward",
           "void pytorch_flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits<128, 64, 128, 8, 2, 4, 2, false, false, cutlass::bfloat16_t>, false, true, false, false, false, false>(pytorch_flash::Flash_bwd_params)",
           5000);
    launch("aten::_scaled_dot_product_cudnn_attention", "cudnn_generated_fort_native_sdpa_sm90_knob_7_64x128x128_4x1x1_kernel0_0", 1100);
    launch("aten::_scaled_dot_product_cudnn_attention_backward",
           "cudnn_generated_fort_native_sdpa_sm90_knob_9_64x128x128_4x1x1_kernel0_0_bprop", 2900);
  }
  ev.pop_back();
  return R"({"traceEvents": [)" + ev + "]}";
}
}  // namespace

// Catches: sdpa's cuDNN calls left out of the fit (not read as attention), or read as the flash
// backend (whose rate they would then set: cuDNN runs ~1.8x its rate on Hopper).
TEST_CASE("fit --trace tells sdpa's cuDNN backend from its flash backend", "[trace][fit][attention]") {
  const TraceFitData d = extract_fit_data({read_kineto_trace_text(sdpa_backends_trace(5), "sdpa.json")}, AnalyzeOptions{});
  std::map<std::pair<AttentionKernel, bool>, AttentionPoint> by;
  for (const auto& a : d.attention) by[{a.kernel, a.backward}] = a;
  REQUIRE(by.size() == 4);
  for (AttentionKernel k : {AttentionKernel::SdpaFlash, AttentionKernel::SdpaCudnn})
    for (bool backward : {false, true}) {
      REQUIRE(by.count({k, backward}));
      const AttentionPoint& a = by.at({k, backward});
      CHECK(a.count == 5);
      CHECK(a.batch == 2);
      CHECK(a.seq == 4096);
      CHECK(a.hidden == 32 * 128);
      CHECK(a.head_dim == 128);
    }
  CHECK(by.at({AttentionKernel::SdpaCudnn, false}).median == Time::from_us(1100));
  CHECK(by.at({AttentionKernel::SdpaCudnn, true}).median == Time::from_us(2900));
  CHECK(by.at({AttentionKernel::SdpaFlash, false}).median == Time::from_us(2000));
  // cuDNN's kernel names carry no causal flag: the flash forward's does (true); cuDNN's is taken.
  CHECK(by.at({AttentionKernel::SdpaCudnn, false}).causal_assumed);
  CHECK_FALSE(by.at({AttentionKernel::SdpaFlash, false}).causal_assumed);
}

namespace {
// On the non-vectorized path: ten bf16 comparisons of 2^20 elements against a 0-dim float
// tensor (a bool out: 3 bytes per element, cast) of 120 us, ten bf16 broadcast adds of 2^20
// elements (6 bytes per element) of 100 us, and `copies` fp32 transposing copies of 2^20
// elements (8 bytes per element) of 110 us.
std::string strided_trace(int copies) {
  std::string ev = R"({"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 10000},)";
  int corr = 1;
  auto launch = [&](const std::string& op, const std::string& args, int ts, int dur) {
    ev += R"({"ph": "X", "cat": "cpu_op", "name": ")" + op + R"(", "pid": 1, "tid": 1, "ts": )" + std::to_string(ts) +
          R"(, "dur": 20, "args": )" + args + "},";
    ev += R"({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": )" + std::to_string(ts + 5) +
          R"(, "dur": 2, "args": {"correlation": )" + std::to_string(corr) + "}},";
    ev += R"({"ph": "X", "cat": "kernel", "name": "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl<F>>", "pid": 0, "tid": 7, "ts": )" +
          std::to_string(2000 + 200 * corr) + R"(, "dur": )" + std::to_string(dur) +
          R"(, "args": {"device": 0, "stream": 7, "correlation": )" + std::to_string(corr) + "}},";
    ++corr;
  };
  for (int i = 0; i < 10; ++i)
    launch("aten::eq", R"({"Input Dims": [[1048576], []], "Input type": ["c10::BFloat16", "float"]})", 100 * i + 10, 120);
  for (int i = 0; i < 10; ++i)
    launch("aten::add", R"({"Input Dims": [[1048576], [1048576], []], "Input type": ["c10::BFloat16", "c10::BFloat16", "Scalar"]})",
           1100 + 100 * i, 100);
  for (int i = 0; i < copies; ++i)
    launch("aten::copy_", R"({"Input Dims": [[1048576], [1048576], []], "Input type": ["float", "float", "Scalar"]})", 2100 + 100 * i, 110);
  ev.pop_back();
  return R"({"traceEvents": [)" + ev + "]}";
}
}  // namespace

// Catches: the per-element time fitted from kernels their bytes hold (an fp32 copy would price
// bf16 adds at its 0.105 ns per element), casting and plain kernels mixed into one time, the
// class bandwidth taken over the element-bound kernels (which it does not price), or numbers set
// from too few kernels.
TEST_CASE("fit --trace times the non-vectorized path per element, casting apart, and its bytes from the rest",
          "[trace][fit]") {
  const TraceFitData d = extract_fit_data({read_kineto_trace_text(strided_trace(10), "strided.json")}, AnalyzeOptions{});
  REQUIRE(d.memory_classes.size() == 1);
  const MemoryClassPoint& m = d.memory_classes.front();
  CHECK(m.cls == KernelClass::ElementwiseStrided);
  CHECK(m.count == 30);
  // The adds: 1 ms over 10 x 2^20 elements.
  CHECK(m.plain.count == 10);
  CHECK(m.plain.elements == 10 * 1048576);
  CHECK(m.plain.time == Time::from_us(1000));
  CHECK(m.plain.ns_per_element == Approx(1.0e6 / (10.0 * 1048576)));
  // The comparisons: 1.2 ms over 10 x 2^20 elements.
  CHECK(m.cast.count == 10);
  CHECK(m.cast.elements == 10 * 1048576);
  CHECK(m.cast.time == Time::from_us(1200));
  CHECK(m.cast.ns_per_element == Approx(1.2e6 / (10.0 * 1048576)));
  // The copies: 10 x 8 MiB over 1.1 ms.
  CHECK(m.byte_bound_time == Time::from_us(1100));
  CHECK(m.byte_bound_rate.gbps() == Approx(10.0 * 8 * 1048576 / 1.1e-3 / 1e9));
  HardwareProfile p;
  nlohmann::json prov;
  apply_trace_compute(d, ComputeProfile(p.compute), p, prov);
  CHECK(p.compute.strided_element_ns == Approx(0.09537).epsilon(1e-3));
  CHECK(p.compute.strided_cast_element_ns == Approx(0.11444).epsilon(1e-3));
  CHECK(prov["trace_compute"]["elementwise_strided_ns_per_element"]["kernels"] == 10);
  CHECK(prov["trace_compute"]["elementwise_strided_cast_ns_per_element"]["kernels"] == 10);
  CHECK(p.compute.class_bandwidth.at(KernelClass::ElementwiseStrided).gbps() == Approx(m.byte_bound_rate.gbps()));
  CHECK(prov["trace_compute"]["memory_bandwidth_GBps"]["elementwise_strided"]["kernels"] == 10);
  CHECK(p.sources.contains("compute.memory_bandwidth_GBps.elementwise_strided"));
  CHECK(p.sources.contains("compute.elementwise_strided_cast_ns_per_element"));

  // Two copies are too few to stand for the class's bytes: the base's bandwidth stays, and the
  // profile does not name the trace as its source.
  const TraceFitData few = extract_fit_data({read_kineto_trace_text(strided_trace(2), "strided.json")}, AnalyzeOptions{});
  HardwareProfile q;
  q.compute.class_bandwidth[KernelClass::ElementwiseStrided] = Bandwidth::from_gbps(883);
  nlohmann::json prov_few;
  apply_trace_compute(few, ComputeProfile(q.compute), q, prov_few);
  CHECK(q.compute.class_bandwidth.at(KernelClass::ElementwiseStrided).gbps() == Approx(883));
  CHECK(prov_few["trace_compute"]["memory_bandwidth_GBps"]["elementwise_strided"].contains("kept"));
  CHECK_FALSE(q.sources.contains("compute.memory_bandwidth_GBps.elementwise_strided"));
  CHECK(q.compute.strided_element_ns == Approx(0.09537).epsilon(1e-3));
}

namespace {
// Ten fp32 adds over 1 MiB tensors (3 MiB moved, 100 us each) and ten over 64 MiB ones (192 MiB,
// 2 ms each), all vectorized.
std::string sized_adds_trace() {
  std::string ev = R"({"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 100000},)";
  const std::string vec = "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>";
  for (int i = 0; i < 20; ++i) {
    const bool big = i >= 10;
    const std::string n = big ? "16777216" : "262144";
    ev += R"({"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": )" + std::to_string(100 * i + 10) +
          R"(, "dur": 20, "args": {"Input Dims": [[)" + n + "], [" + n + R"(], []], "Input type": ["float", "float", "Scalar"]}},)";
    ev += R"({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": )" +
          std::to_string(100 * i + 15) + R"(, "dur": 2, "args": {"correlation": )" + std::to_string(i + 1) + "}},";
    ev += R"({"ph": "X", "cat": "kernel", "name": ")" + vec + R"(", "pid": 0, "tid": 7, "ts": )" +
          std::to_string(5000 + 3000 * i) + R"(, "dur": )" + (big ? "2000" : "100") +
          R"(, "args": {"device": 0, "stream": 7, "correlation": )" + std::to_string(i + 1) + "}},";
  }
  ev.pop_back();
  return R"({"traceEvents": [)" + ev + "]}";
}
}  // namespace

// Catches: the streaming rate not measured from the kernels over tensors larger than the base
// profile's L2, measured without an L2, or the class rate changed by the split.
TEST_CASE("fit --trace measures the DRAM streaming rate from the elementwise kernels over tensors larger than the L2",
          "[trace][fit]") {
  const TraceFitData d = extract_fit_data({read_kineto_trace_text(sized_adds_trace(), "sized.json")}, AnalyzeOptions{});
  REQUIRE(d.memory_classes.size() == 1);
  const MemoryClassPoint& m = d.memory_classes.front();
  REQUIRE(m.kernels.size() == 20);
  CHECK(std::count_if(m.kernels.begin(), m.kernels.end(), [](const MemoryKernel& k) { return k.largest == 4 * 262144; }) == 10);
  CHECK(std::count_if(m.kernels.begin(), m.kernels.end(), [](const MemoryKernel& k) { return k.largest == 4 * 16777216; }) == 10);
  // No L2 in the base: one rate over all twenty, no streaming rate.
  HardwareProfile none;
  nlohmann::json prov;
  apply_trace_compute(d, ComputeProfile(none.compute), none, prov);
  CHECK(none.compute.class_bandwidth.at(KernelClass::Elementwise).gbps() == Approx(m.rate.gbps()));
  CHECK(none.compute.dram_stream.bytes_per_s == 0);
  // A 40 MiB L2: the large adds give the streaming rate (1,920 MiB over 20 ms), named as its
  // source; the class rate stays the one over all twenty.
  HardwareProfile p;
  p.compute.l2_bytes = 40.0 * (1 << 20);
  nlohmann::json prov2;
  apply_trace_compute(d, ComputeProfile(p.compute), p, prov2);
  CHECK(p.compute.dram_stream.gbps() == Approx(10 * 192.0 * (1 << 20) / 20e-3 / 1e9));
  CHECK(prov2["trace_compute"]["dram_stream_GBps"]["kernels"] == 10);
  CHECK(p.compute.class_bandwidth.at(KernelClass::Elementwise).gbps() == Approx(m.rate.gbps()));
  CHECK(prov2["trace_compute"]["memory_bandwidth_GBps"]["elementwise"]["kernels"] == 20);
  CHECK(p.sources.contains("compute.dram_stream_GBps"));
  // Too few large kernels (an L2 larger than every tensor): no streaming rate.
  HardwareProfile q;
  q.compute.l2_bytes = 128.0 * (1 << 20);
  nlohmann::json prov3;
  apply_trace_compute(d, ComputeProfile(q.compute), q, prov3);
  CHECK(q.compute.dram_stream.bytes_per_s == 0);
}

// The li-plus ZeRO-1 trace (eager OPT-1.3B on A800), steps 11-12: the numbers
// docs/calibration.md and docs/trace-to-what-if.md quote.
TEST_CASE("fit --trace on the li-plus ZeRO-1 trace: the eager OPT's memory-bound classes", "[trace][fit][data]") {
  auto t = read_kineto_trace(kTraces + "li-plus_playground/zero1__rank_0__n122-248-036_415351.1703670656319922979.pt.trace.json.gz");
  AnalyzeOptions o;
  parse_step_range("11-12", o);
  const TraceFitData d = extract_fit_data({t}, o);
  std::map<KernelClass, MemoryClassPoint> by;
  for (const auto& m : d.memory_classes) by[m.cls] = m;
  CHECK(by[KernelClass::Elementwise].count == 788);
  CHECK(by[KernelClass::Elementwise].rate.gbps() == Approx(1744.7).epsilon(1e-4));
  CHECK(by[KernelClass::ElementwiseStrided].count == 604);
  CHECK(by[KernelClass::ElementwiseStrided].rate.gbps() == Approx(688.1).epsilon(1e-4));
  CHECK(by[KernelClass::Reduction].count == 173);
  CHECK(by[KernelClass::Reduction].rate.gbps() == Approx(1332.0).epsilon(1e-4));
  CHECK(by[KernelClass::Norm].count == 98);
  CHECK(by[KernelClass::Norm].rate.gbps() == Approx(1022.7).epsilon(1e-4));
  HardwareProfile p;
  nlohmann::json prov;
  ComputeProfile base = p.compute;
  base.class_bandwidth[KernelClass::Reduction] = Bandwidth::from_gbps(938);  // the A800 profile's
  apply_trace_compute(d, base, p, prov);
  CHECK(prov["trace_compute"]["memory_bandwidth_GBps"]["reduction"]["kernels"] == 173);
  CHECK(prov["trace_compute"]["memory_bandwidth_GBps"]["reduction"]["GBps"].get<double>() == Approx(1332.0));
  CHECK(prov["trace_compute"]["memory_bandwidth_GBps"]["reduction"]["base_GBps"].get<double>() == Approx(938.0));
  CHECK_FALSE(prov["trace_compute"]["memory_bandwidth_GBps"]["norm"].contains("base_GBps"));  // the base had none
  // The non-vectorized kernels per element, of at most 6 bytes per element: 440 plain ones (the
  // transposing copies at 0.0051 ns, the mask add at 0.0046), 40.3 ms over 7.92e9 elements; and
  // 144 casting ones (torch.max, lt and eq against OPT's float 0-dim tensor, 0.0057-0.0060 ns),
  // 56.9 ms over 9.66e9 elements.
  const MemoryClassPoint& s = by[KernelClass::ElementwiseStrided];
  CHECK(s.plain.count == 440);
  CHECK(s.plain.elements == 7'922'056'192);
  CHECK(p.compute.strided_element_ns == Approx(0.00508));
  CHECK(prov["trace_compute"]["elementwise_strided_ns_per_element"]["ns"] == Approx(0.00508));
  CHECK(s.cast.count == 144);
  CHECK(s.cast.elements == 9'663'676'416);
  CHECK(p.compute.strided_cast_element_ns == Approx(0.00589));
  // The class's bytes per second from the other 20 (fp32 and int64 ones): 1,251.5 GB/s, where
  // all 604 together give 688.1.
  CHECK(s.rate.gbps() == Approx(688.1).epsilon(1e-4));
  CHECK(p.compute.class_bandwidth.at(KernelClass::ElementwiseStrided).gbps() == Approx(1251.5).epsilon(1e-4));
  CHECK(prov["trace_compute"]["memory_bandwidth_GBps"]["elementwise_strided"]["kernels"] == 20);
  // With the A800's 40 MiB L2: the 306 elementwise kernels over larger tensors (the 128 MiB
  // attention scores) run at 1,744 GB/s, BabelStream's 1,700 on an A100 within 3 %.
  HardwareProfile a800;
  a800.compute.l2_bytes = 40.0 * (1 << 20);
  nlohmann::json prov_l2;
  apply_trace_compute(d, ComputeProfile(a800.compute), a800, prov_l2);
  CHECK(prov_l2["trace_compute"]["dram_stream_GBps"]["kernels"] == 306);
  CHECK(a800.compute.dram_stream.gbps() == Approx(1743.7).epsilon(1e-4));
  // Each number the trace replaced names the trace as its source, not the base profile's.
  CHECK_THAT(p.sources["compute.elementwise_strided_ns_per_element"].get<std::string>(), Catch::Contains("fit --trace"));
  CHECK_THAT(p.sources["compute.memory_bandwidth_GBps.elementwise_strided"].get<std::string>(),
             Catch::Contains("provenance.trace_compute.memory_bandwidth_GBps.elementwise_strided"));
  CHECK(p.sources.contains("compute.gemm_table"));
}

namespace {
// A step of bf16 aten::mm calls of one shape, each launching one 100 us GEMM kernel, with an
// 8-rank all-reduce kernel of grid [16, 1, 1] running beside the first `beside` of them, on a
// GPU of 108 SMs.
std::string gemm_trace(int calls, int beside) {
  std::string ev = R"({"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 10000},)";
  for (int i = 0; i < calls; ++i) {
    const int ts = 100 * i + 10, gpu = 2000 + 200 * i;
    ev += R"({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": )" + std::to_string(ts) +
          R"(, "dur": 20, "args": {"Input Dims": [[4096, 2048], [2048, 2048]], "Input type": ["c10::BFloat16", "c10::BFloat16"]}},)";
    ev += R"({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": )" + std::to_string(ts + 5) +
          R"(, "dur": 2, "args": {"correlation": )" + std::to_string(i + 1) + "}},";
    ev += R"({"ph": "X", "cat": "kernel", "name": "ampere_bf16_s16816gemm_bf16_256x128_ldg8_f2f_stages_64x3_nn", "pid": 0, "tid": 7, "ts": )" +
          std::to_string(gpu) + R"(, "dur": 100, "args": {"device": 0, "stream": 7, "correlation": )" + std::to_string(i + 1) +
          R"(, "grid": [128, 8, 1], "block": [256, 1, 1]}},)";
  }
  if (beside > 0)
    ev += R"j({"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(x)", "pid": 0, "tid": 9, "ts": 1990, "dur": )j" +
          std::to_string(200 * beside) + R"j(, "args": {"device": 0, "stream": 9, "grid": [16, 1, 1], "block": [544, 1, 1]}},)j";
  ev.pop_back();
  return R"({"deviceProperties": [{"id": 0, "name": "NVIDIA A800-SXM4-80GB", "numSms": 108}], "traceEvents": [)" + ev + "]}";
}
}  // namespace

// Catches: a GEMM shape the trace only shows beside NCCL kernels (FSDP overlaps nearly every
// GEMM with an all-gather or reduce-scatter) entering the table at its slowed rate, which the
// engine's contention then slows a second time; and the SMs not read from the trace.
TEST_CASE("fit --trace reads the SMs a collective holds and brings GEMMs seen only beside NCCL back to their solo rate",
          "[trace][fit][contention]") {
  const double flops = 2.0 * 4096 * 2048 * 2048;
  const TraceFitData alone = extract_fit_data({read_kineto_trace_text(gemm_trace(4, 0), "gemm.json")}, AnalyzeOptions{});
  REQUIRE(alone.gemms.size() == 1);
  CHECK(alone.gemms[0].rate.flops_per_s == Approx(flops / 100e-6));
  CHECK(alone.gemms[0].solo_correction == 1.0);
  CHECK(alone.gemms[0].shape.layout == GemmLayout::NN);  // from the kernel name's "_nn"
  CHECK(alone.gpu_sms == 108);
  CHECK(alone.collective_sms == 0);  // no NCCL kernel

  const TraceFitData beside = extract_fit_data({read_kineto_trace_text(gemm_trace(4, 4), "gemm.json")}, AnalyzeOptions{});
  REQUIRE(beside.gemms.size() == 1);
  CHECK(beside.gpu_sms == 108);
  CHECK(beside.collective_sms == 16);
  CHECK(beside.collective_grid_kernels == 1);
  CHECK(beside.contention_shapes == 0);  // no shape seen both ways: the SM share stands in
  CHECK(beside.gemms[0].overlapped == 4);
  CHECK(beside.gemms[0].solo_correction == Approx(108.0 / 92.0));
  CHECK(beside.gemms[0].rate.flops_per_s == Approx(flops / 100e-6 * 108.0 / 92.0));
  // Into a profile: the resource model on, and the correction said in the provenance.
  HardwareProfile p;
  nlohmann::json prov;
  apply_trace_compute(beside, ComputeProfile(p.compute), p, prov);
  CHECK(p.contention.gpu_sms == 108);
  CHECK(p.contention.collective_sms == 16);
  CHECK(prov.at("trace_compute").at("gemm_shapes_only_beside_nccl").at("shapes") == 1);
}

// Catches: the ratio inverted, the summed times not weighted by calls, or the base's in-training
// factor left out of what it prices.
TEST_CASE("fit --trace compares the trace's GEMM rates with the base profile's for the same shapes", "[trace][fit]") {
  ComputeProfile base;
  base.peak[Dtype::BF16] = FlopRate{1000e12};
  base.gemm_efficiency = 0.5;  // no table: 500 TFLOP/s for every large shape
  base.model_memory_kernels = false;
  TraceFitData d;
  const GemmShape big{8192, 8192, 8192, 1, Dtype::BF16};
  const GemmShape other{8192, 4096, 8192, 1, Dtype::BF16};
  d.gemms.push_back(GemmPoint{big, 3, {}, FlopRate{400e12}});    // 0.8 of the base's rate, 3 calls
  d.gemms.push_back(GemmPoint{other, 1, {}, FlopRate{600e12}});  // 1.2, 1 call
  nlohmann::json vs = gemm_rates_against_base(d, base);
  CHECK(vs["shapes"] == 2);
  CHECK(vs["calls"] == 4);
  CHECK(vs["median"].get<double>() == Approx(1.0));
  CHECK(vs["min"].get<double>() == Approx(0.8));
  CHECK(vs["max"].get<double>() == Approx(1.2));
  // Times: base 3 x 2.199 ms + 1.100 ms; measured 3 x 2.749 ms + 0.916 ms.
  const double fb = big.flops().count, fo = other.flops().count;
  CHECK(vs["time_weighted"].get<double>() == Approx((3 * fb / 500e12 + fo / 500e12) / (3 * fb / 400e12 + fo / 600e12)).epsilon(1e-3));
  CHECK_THAT(vs["base_rates"].get<std::string>(), Catch::Contains("roofline"));
  // A base already corrected to in-training rates prices slower: the trace compares faster.
  base.gemm_table.push_back(GemmMeasurement{big, FlopRate{500e12}});
  base.gemm_table.push_back(GemmMeasurement{other, FlopRate{500e12}});
  base.gemm_in_training_factor = 0.8;
  CHECK(gemm_rates_against_base(d, base)["min"].get<double>() == Approx(1.0));  // 400 / (500 x 0.8)
  // Applied by the fit: provenance.trace_compute.gemm_vs_base.
  HardwareProfile p;
  p.compute = base;
  nlohmann::json prov;
  apply_trace_compute(d, base, p, prov);
  CHECK(prov["trace_compute"]["gemm_vs_base"]["shapes"] == 2);
  CHECK(gemm_rates_against_base(TraceFitData{}, base).is_null());
}

TEST_CASE("fit --trace prints the trace against the base profile: a GEMM line and a memory-class line", "[trace][fit]") {
  CHECK(against_base_summary(nlohmann::json::object()).empty());
  nlohmann::json tc = {{"gemm_vs_base", {{"base_rates", "roofline"}, {"time_weighted", 0.9}, {"median", 0.95}, {"min", 0.8},
                                          {"max", 1.1}, {"shapes", 4}}},
                       {"memory_bandwidth_GBps", {{"elementwise", {{"GBps", 1700.0}, {"base_GBps", 1899.0}}},
                                                  {"norm", {{"GBps", 900.0}}},
                                                  {"reduction", {{"kept", "the base profile's"}}}}}};
  auto lines = against_base_summary(tc);
  REQUIRE(lines.size() == 2);
  CHECK_THAT(lines[0], Catch::Contains("(roofline): 0.900 by time, median 0.950 (0.800-1.100) over 4 shapes"));
  CHECK(lines[1] == "memory-bound classes in the trace, GB/s (the base profile's): elementwise 1700.0 (1899.0), norm 900.0");
}

// Catches: the implied clock taken against the base's throttled rates instead of its boost-clock
// ones, or the full-load clock not undoing the u^(-1/3) law.
TEST_CASE("fit --trace says which clock the trace's GEMMs ran at, against a base with compute.clock", "[trace][fit][clock]") {
  ComputeProfile base;
  base.peak[Dtype::BF16] = FlopRate{1000e12};
  base.gemm_efficiency = 0.5;  // the roofline at boost: 500 TFLOP/s, u = 0.5
  base.model_memory_kernels = false;
  TraceFitData d;
  const GemmShape big{8192, 8192, 8192, 1, Dtype::BF16};
  d.gemms.push_back(GemmPoint{big, 2, {}, FlopRate{400e12}});  // 0.8 of the boost rate
  CHECK_FALSE(gemm_rates_against_base(d, base).contains("implied_clock"));  // no clock block: nothing implied
  base.clock = ClockProfile{1980, 700, 1500};
  const nlohmann::json c = gemm_rates_against_base(d, base)["implied_clock"];
  // 1,980 x 0.8 = 1,584 MHz; full load 1,584 x 0.5^(1/3) = 1,257.2 MHz.
  CHECK(c["gemm_MHz"].get<double>() == 1584);
  CHECK(c["full_load_MHz"].get<double>() == 1257);
  CHECK(c["base_full_load_MHz"].get<double>() == 1500);
  HardwareProfile p;
  p.compute = base;
  nlohmann::json prov;
  apply_trace_compute(d, base, p, prov);
  const auto lines = against_base_summary(prov["trace_compute"]);
  REQUIRE(lines.size() >= 2);
  CHECK_THAT(lines[1], Catch::Contains("1584 MHz by time") && Catch::Contains("full_load_MHz 1257"));
}
