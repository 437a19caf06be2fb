#include <catch2/catch.hpp>

#include "sim/strategies/common.hpp"
#include <array>
#include <utility>

#include "sim/core/error.hpp"
#include "sim/hardware/compute_model.hpp"
#include "sim/workload/workload.hpp"
#include "tests/test_support.hpp"

using namespace stepsim;

namespace {

const Layer& first_block(const Workload& w) {
  for (const auto& l : w.layers)
    if (l.kind == LayerKind::Block) return l;
  throw std::logic_error("no block");
}

Workload opt13(WorkloadOptions o) { return build_transformer("opt-1.3b", preset_dims("opt-1.3b"), 8, 512, Dtype::BF16, o); }

std::int64_t gemm_count(const std::vector<Op>& ops, bool batched) {
  std::int64_t n = 0;
  for (const auto& o : ops)
    for (const auto& g : o.work.gemms) n += (g.batch > 1) == batched;
  return n;
}

std::vector<Op> all_forward(const Layer& l) {
  std::vector<Op> ops;
  for (const auto& m : l.modules) ops.insert(ops.end(), m.forward.begin(), m.forward.end());
  return ops;
}

std::vector<Op> all_backward(const Layer& l) {
  std::vector<Op> ops;
  for (const auto& m : l.modules) ops.insert(ops.end(), m.backward.begin(), m.backward.end());
  return ops;
}

}  // namespace

TEST_CASE("An HF eager OPT block launches the kernels the DeepSpeed-Chat trace shows", "[workload]") {
  // li-plus zero1 trace, one decoder layer (memsets and the 1-element HtoD copy left out, as
  // analyze counts kernels): forward = layer_norm, q addmm + scale mul, k addmm + contiguous,
  // v addmm + contiguous, q contiguous, bmm, mask add, max, softmax, bmm, reshape copy, out_proj
  // addmm, dropout, add, layer_norm, fc1 addmm, relu, fc2 addmm, dropout, add = 23 kernels;
  // backward = 45 (counted op by op in transformer.cpp's comments).
  Workload w = opt13(preset_options("opt-1.3b"));
  const Layer& b = first_block(w);
  CHECK(b.forward_kernels() == 23);
  CHECK(b.backward_kernels() == 45);
  // 6 linear GEMMs forward (q, k, v, out, fc1, fc2) and 12 backward; the attention matmuls are
  // batched GEMMs: 2 forward (QK^T, PV), 4 backward.
  CHECK(gemm_count(all_forward(b), false) == 6);
  CHECK(gemm_count(all_forward(b), true) == 2);
  CHECK(gemm_count(all_backward(b), false) == 12);
  CHECK(gemm_count(all_backward(b), true) == 4);
  // QK^T: 8*32 = 256 batches of [512 x 64] x [64 x 512].
  for (const auto& o : all_forward(b))
    if (o.name == "bmm.qk") CHECK(o.work.gemms.front() == GemmShape{512, 512, 64, 256, Dtype::BF16});
}

TEST_CASE("Eager OPT saves the s^2 scores twice per block, flash saves none of them", "[workload][memory]") {
  // T = 4096 tokens, h = 2048, bf16: a [T, h] tensor is 16,777,216 B; one b*H*s*s score tensor
  // 8*32*512*512*2 = 134,217,728 B. Eager OPT keeps: block input (layer_norm) + its mean/rstd,
  // the q/k/v GEMM input, q, k, v, the mask-add output (torch.max's input), softmax's output,
  // out_proj's input, ln2's input + stats, fc1's input, the ReLU output (8192 wide: 67,108,864),
  // two bool dropout masks (4096*2048 B each).
  const std::int64_t th = 4096LL * 2048 * 2, s2 = 8LL * 32 * 512 * 512 * 2, stats = 4096LL * 8;
  const std::int64_t eager = 8 * th + 2 * stats + 2 * s2 + 4096LL * 8192 * 2 + 2 * 4096LL * 2048;
  CHECK(first_block(opt13(preset_options("opt-1.3b"))).saved_activations.count == eager);
  // Flash: no score tensors; the attention kernel keeps q, k, v, out and the fp32 log-sum-exp
  // (8*32*512*4 B) instead of the copies, the probabilities and out_proj's separate input.
  WorkloadOptions f = preset_options("opt-1.3b");
  f.attention = Attention::Flash;
  const std::int64_t lse = 8LL * 32 * 512 * 4;
  const std::int64_t flash = th /*x*/ + stats + th /*qkv input*/ + 4 * th + lse + th /*out_proj input*/ + th + stats +
                             th + 4096LL * 8192 * 2 + 2 * 4096LL * 2048;
  CHECK(first_block(opt13(f)).saved_activations.count == flash);
}

TEST_CASE("Dropout 0 removes the dropout kernels and their masks", "[workload]") {
  WorkloadOptions o = preset_options("opt-1.3b");
  const Layer a = first_block(opt13(o));
  o.dropout = 0;
  const Layer b = first_block(opt13(o));
  // Two residual dropouts per block: one forward kernel and one backward kernel each, and a
  // 4096*2048-byte bool mask each.
  CHECK(a.forward_kernels() - b.forward_kernels() == 2);
  CHECK(a.backward_kernels() - b.backward_kernels() == 2);
  CHECK(a.saved_activations.count - b.saved_activations.count == 2 * 4096LL * 2048);
}

TEST_CASE("Checkpointing policies trade saved bytes for recomputed ops", "[workload][memory]") {
  WorkloadOptions o = preset_options("llama3-8b");
  auto block_with = [&](Checkpointing c) {
    o.checkpointing = c;
    return first_block(build_transformer("llama3-8b", preset_dims("llama3-8b"), 1, 2048, Dtype::BF16, o));
  };
  const Layer none = block_with(Checkpointing::None), full = block_with(Checkpointing::Full),
              sel = block_with(Checkpointing::Selective), sac = block_with(Checkpointing::OpSac);
  // Full: only the block input (2048 * 4096 * 2 B) stays; backward re-runs every forward op.
  CHECK(full.saved_activations.count == 2048LL * 4096 * 2);
  CHECK(full.recompute.size() == all_forward(none).size());
  CHECK(full.recompute_activations == none.saved_activations);
  // SwiGLU without checkpointing saves four [T, ffn] intermediates (w1 x, silu, w3 x, the
  // product), 4 * 2048 * 14336 * 2 B, among the rest.
  CHECK(none.saved_activations.count > 4 * 2048LL * 14336 * 2);
  // Selective and op_sac lie in between, and both recompute something.
  CHECK(sel.saved_activations < none.saved_activations);
  CHECK(sel.saved_activations > full.saved_activations);
  CHECK_FALSE(sel.recompute.empty());
  CHECK(sac.saved_activations < none.saved_activations);
  CHECK(sac.saved_activations > full.saved_activations);
  CHECK_FALSE(sac.recompute.empty());
  // every_k with k = 2: blocks 1, 3, ... (0-based) are fully checkpointed, 0, 2, ... not:
  // torchtitan's wrapper counts the blocks from 1 and wraps when the count is a multiple of k.
  o.checkpointing = Checkpointing::EveryK;
  o.checkpoint_every = 2;
  Workload w = build_transformer("llama3-8b", preset_dims("llama3-8b"), 1, 2048, Dtype::BF16, o);
  CHECK(w.layers[2].saved_activations == full.saved_activations);
  CHECK(w.layers[1].saved_activations == none.saved_activations);
  // k = 3 over 32 blocks: the 3rd, 6th, ..., 30th: 10 blocks (counting from 0 would give 11).
  o.checkpoint_every = 3;
  w = build_transformer("llama3-8b", preset_dims("llama3-8b"), 1, 2048, Dtype::BF16, o);
  int checkpointed = 0;
  for (const auto& l : w.layers)
    if (l.kind == LayerKind::Block && !l.recompute.empty()) ++checkpointed;
  CHECK(checkpointed == 10);
  CHECK(w.layers[3].saved_activations == full.saved_activations);  // block 2
}

TEST_CASE("The autograd graph holds the nodes each implementation's forward creates", "[workload][host]") {
  // HF OPT eager, counted from modeling_opt.py: 52 nodes per block, 2 NativeDropout at p = 0.1 and
  // 16 AccumulateGrad; the embeddings (2 Embedding, Add), the final LayerNorm and the head (lm_head
  // and the shifted loss: 10) with their 4 parameters. The li-plus ZeRO traces' backward
  // evaluates 1,700 nodes (python_function run_backward spans, both steps); the 2 not counted
  // here are DeepSpeed's (the loss scale's Mul and loss.float()'s ToCopy).
  WorkloadOptions o = preset_options("opt-1.3b");
  const Workload w = opt13(o);
  CHECK(first_block(w).autograd_nodes == 54);
  CHECK(first_block(w).param_count() == 16);
  CHECK(w.autograd_nodes() == 24 * (54 + 16) + 3 + 1 + 10 + 4);
  o.dropout = 0;
  CHECK(first_block(opt13(o)).autograd_nodes == 52);
  // Llama: torchtitan's block (2 RMSNorms of 8 nodes, rotary, 7 linears) and GQA's repeat_kv;
  // compiled, one CompiledFunctionBackward per block.
  WorkloadOptions t = preset_options("llama3-8b");
  const Workload eager = build_transformer("llama3-8b", preset_dims("llama3-8b"), 1, 2048, Dtype::BF16, t);
  CHECK(first_block(eager).autograd_nodes == 72 + 8);
  t.compile = true;
  const Workload compiled = build_transformer("llama3-8b", preset_dims("llama3-8b"), 1, 2048, Dtype::BF16, t);
  CHECK(first_block(compiled).autograd_nodes == 1);
  CHECK(compiled.autograd_nodes() < eager.autograd_nodes());
  // MPT (llm-foundry) and Megatron GPT blocks.
  CHECK(first_block(build_transformer("mpt-7b", preset_dims("mpt-7b"), 1, 2048, Dtype::BF16, preset_options("mpt-7b")))
            .autograd_nodes == 27);
  CHECK(first_block(build_transformer("gpt3-6.7b", preset_dims("gpt3-6.7b"), 1, 2048, Dtype::BF16,
                                      preset_options("gpt3-6.7b")))
            .autograd_nodes == 30);
  // Toy layers (fixed times) have no graph to walk.
  CHECK(build_toy({ToyLayerSpec{Time::from_ms(1), Time::from_ms(2), 10, Bytes{0}}}, Dtype::BF16).autograd_nodes() == 0);
}

TEST_CASE("torch.compile fuses memory-bound runs: fewer kernels and fewer bytes", "[workload]") {
  WorkloadOptions o = preset_options("llama3-8b");
  const Layer eager = first_block(build_transformer("llama3-8b", preset_dims("llama3-8b"), 1, 2048, Dtype::BF16, o));
  o.compile = true;
  const Layer compiled = first_block(build_transformer("llama3-8b", preset_dims("llama3-8b"), 1, 2048, Dtype::BF16, o));
  CHECK(compiled.forward_kernels() < eager.forward_kernels());
  CHECK(compiled.backward_kernels() < eager.backward_kernels());
  CHECK(compiled.forward().memory_bytes < eager.forward().memory_bytes);
  // The GEMMs are untouched: 7 linear GEMMs forward either way.
  CHECK(gemm_count(all_forward(compiled), false) == 7);
  CHECK(compiled.forward_dispatch == HostDispatch::Launch);
  CHECK(eager.forward_dispatch == HostDispatch::Eager);
  // AOTAutograd's min-cut partitioner recomputes pointwise ops in backward: the fused
  // silu(gate) * up saves gate and up (2 x [T, ffn] bf16), not silu(gate) as eager does, and
  // writes nothing but the product.
  auto act_op = [](const Layer& l) -> const Op& {
    for (const Module& m : l.modules)
      if (m.name.find("mlp.act") != std::string::npos) return m.forward.back();
    FAIL("no mlp.act module");
    return l.modules.front().forward.front();
  };
  const std::int64_t TI2 = 2048LL * 14336 * 2;
  const Op& fused = act_op(compiled);
  CHECK(fused.saved.count == 2 * TI2);
  CHECK(fused.written.count == TI2);
  Bytes eager_act;
  for (const Module& m : eager.modules)
    if (m.name.find("mlp.act") != std::string::npos)
      for (const Op& op : m.forward) eager_act += op.saved;
  CHECK(eager_act.count == 3 * TI2);
  CHECK(compiled.saved_activations < eager.saved_activations);
}

TEST_CASE("Presets pick their implementation's defaults", "[workload]") {
  CHECK(preset_options("opt-1.3b").attention == Attention::Eager);
  CHECK(preset_options("opt-1.3b").dropout == 0.1);
  CHECK(preset_options("llama3-8b").impl == Implementation::Torchtitan);
  CHECK(preset_options("llama3-8b").attention == Attention::SdpaFlash);  // torchtitan: F.scaled_dot_product_attention
  CHECK(preset_options("llama3-8b").dropout == 0);
  CHECK(preset_options("mpt-7b").impl == Implementation::LlmFoundry);
  // llm-foundry's benchmark runs: attn_impl triton (submit_benchmarks.py's default).
  CHECK(preset_options("mpt-7b").attention == Attention::FlashTriton);
  CHECK(preset_options("gpt3-6.7b").impl == Implementation::Megatron);
}

TEST_CASE("The fused attention kernel carries its kind, direction and sequence length", "[workload][attention]") {
  for (auto [a, k] : {std::pair{Attention::Flash, AttentionKernel::Flash}, std::pair{Attention::SdpaFlash, AttentionKernel::SdpaFlash},
                      std::pair{Attention::FlashTriton, AttentionKernel::FlashTriton},
                      std::pair{Attention::Flash3, AttentionKernel::Flash3},
                      std::pair{Attention::SdpaEfficient, AttentionKernel::SdpaEfficient},
                      std::pair{Attention::SdpaCudnn, AttentionKernel::SdpaCudnn}}) {
    WorkloadOptions o = preset_options("llama3-8b");
    o.attention = a;
    const Layer l = first_block(build_transformer("llama3-8b", preset_dims("llama3-8b"), 2, 4096, Dtype::BF16, o));
    int seen = 0;
    for (const auto& m : l.modules) {
      for (const auto& op : m.forward)
        if (op.work.attention.flops.count > 0) {
          CHECK(op.work.attention.kernel == k);
          CHECK_FALSE(op.work.attention.backward);
          CHECK(op.work.attention.seq == 4096);
          // Causal: 2 b s^2 h forward.
          CHECK(op.work.attention.flops.count == Approx(2.0 * 2 * 4096.0 * 4096 * 4096));
          ++seen;
        }
      for (const auto& op : m.backward)
        if (op.work.attention.flops.count > 0) {
          CHECK(op.work.attention.kernel == k);
          CHECK(op.work.attention.backward);
          CHECK(op.work.attention.flops.count == Approx(5.0 * 2 * 4096.0 * 4096 * 4096));
          ++seen;
        }
    }
    CHECK(seen == 2);
  }
}

TEST_CASE("Workload knobs are strict: a bad value names its JSON path", "[workload][config]") {
  auto message = [](nlohmann::json wl) -> std::string {
    nlohmann::json doc = {{"workload", wl},
                          {"cluster", {{"profile", test::ideal_profile().name}}},
                          {"strategy", {{"framework", "ddp"}}}};
    try {
      test::experiment_from_doc(doc);
    } catch (const InputError& err) {
      return err.what();
    }
    return "no error";
  };
  nlohmann::json base = {{"preset", "opt-125m"}, {"seq_len", 128}};
  auto with = [&](const char* k, nlohmann::json v) {
    nlohmann::json w = base;
    w[k] = v;
    return w;
  };
  CHECK_THAT(message(with("attention", "paged")), Catch::Contains("/workload/attention"));
  CHECK_THAT(message(with("dropout", 1.5)), Catch::Contains("/workload/dropout"));
  CHECK_THAT(message(with("activation_checkpointing", "some")), Catch::Contains("/workload/activation_checkpointing"));
  CHECK_THAT(message(with("activation_checkpointing", "every_k")), Catch::Contains("activation_checkpointing_every"));
  CHECK_THAT(message(with("activation_checkpointing_every", 2)), Catch::Contains("activation_checkpointing_every"));
  CHECK_THAT(message(with("checkpoint_early_stop", "yes")), Catch::Contains("/workload/checkpoint_early_stop"));
}

// Catches: an early stop claimed for a PyTorch that had none (it came with 2.1), or llm-foundry
// runs taken as non-reentrant when their yaml does not say so.
TEST_CASE("checkpoint_early_stop needs PyTorch 2.1; llm-foundry's default is Composer's reentrant checkpointing", "[workload][config]") {
  auto doc = [](nlohmann::json wl, const char* torch) {
    nlohmann::json d = {{"workload", wl},
                        {"cluster", {{"profile", std::string(STEPSIM_SOURCE_DIR) + "/configs/hardware/toy-ideal.json"}, {"nodes", 1}, {"gpus_per_node", 8}}},
                        {"strategy", {{"framework", "ddp"}}}};
    if (torch) d["training"] = {{"torch_version", torch}};
    return d;
  };
  const nlohmann::json mpt = {{"preset", "mpt-125m"}, {"seq_len", 128}, {"activation_checkpointing", "full"}};
  nlohmann::json stop = mpt;
  stop["checkpoint_early_stop"] = true;
  try {
    test::experiment_from_doc(doc(stop, "2.0"));
    FAIL("accepted early stop on PyTorch 2.0");
  } catch (const InputError& err) {
    CHECK_THAT(err.what(), Catch::Contains("/workload/checkpoint_early_stop") && Catch::Contains("2.0.0") && Catch::Contains("2.1"));
  }
  // llm-foundry's default is reentrant, whole recompute at any release: Composer defaults
  // activation_checkpointing_reentrant to True (composer v0.15.0 composer/trainer/dist_strategy.py
  // l.129), and train.py at mosaicml/llm-foundry@c6cfb4284 (scripts/train/train.py l.71-83,
  // `if fc_type == 'te' or 'te' not in ffn_type`, true for plain MPT) forces a yaml's false back to
  // true. A run whose yaml says false under a train.py that honours it (HEAD 8c8dd48f7) states
  // early stop: from 2.1 the recompute then leaves out fc2 and the add (2 ops).
  auto recomputed = [&](const nlohmann::json& wl, const char* torch) {
    return test::experiment_from_doc(doc(wl, torch)).workload->layers[1].recompute.size();
  };
  CHECK(recomputed(mpt, "2.1") == recomputed(mpt, "2.0"));
  CHECK(recomputed(mpt, nullptr) == recomputed(mpt, "2.0"));
  CHECK(recomputed(stop, "2.1") + 2 == recomputed(mpt, "2.1"));
  // The results say what applied (effective_workload): the preset's implementation defaults and
  // the recompute's stop; a compiled block's stops whatever the eager setting.
  const nlohmann::json applied = effective_workload(*test::experiment_from_doc(doc(mpt, "2.0")).workload);
  CHECK(applied["implementation"] == "llm_foundry");
  CHECK(applied["attention"] == "flash_triton");
  CHECK(applied["loop_keeps_output"] == true);
  CHECK(applied["activation_checkpointing"] == "full");
  CHECK(applied["checkpoint_early_stop"] == false);
  CHECK(effective_workload(*test::experiment_from_doc(doc(mpt, "2.1")).workload)["checkpoint_early_stop"] == false);
  CHECK(effective_workload(*test::experiment_from_doc(doc(stop, "2.1")).workload)["checkpoint_early_stop"] == true);
  CHECK(applied["training_loop"] == "composer");
  nlohmann::json compiled = mpt;
  compiled["compile"] = true;
  CHECK(effective_workload(*test::experiment_from_doc(doc(compiled, "2.0")).workload)["checkpoint_early_stop"] == true);
  nlohmann::json none = mpt;
  none["activation_checkpointing"] = "none";
  CHECK_FALSE(effective_workload(*test::experiment_from_doc(doc(none, "2.1")).workload).contains("checkpoint_early_stop"));
}

TEST_CASE("Memory-bound kernels are priced at their class's achieved bandwidth", "[compute]") {
  ComputeProfile c;
  c.hbm = Bandwidth::from_gbps(2000);
  c.memory_efficiency = 0.5;
  c.class_bandwidth[KernelClass::ElementwiseStrided] = Bandwidth::from_gbps(800);
  KernelSpec k;
  k.cls = KernelClass::ElementwiseStrided;
  k.work.memory_bytes = Bytes{800'000'000};
  // 800 MB at 800 GB/s = 1 ms; a class without an entry runs at 2000 * 0.5 = 1000 GB/s: 0.8 ms.
  CHECK(kernel_time(c, k) == Time::from_ms(1));
  k.cls = KernelClass::Reduction;
  CHECK(kernel_time(c, k) == Time::from_us(800));
  // Each CUDA kernel of a launch is at least min_kernel_time: 10 kernels of 4 B take 10 x 2 us.
  c.min_kernel_time = Time::from_us(2);
  k.work.memory_bytes = Bytes{4};
  k.kernels = 10;
  CHECK(kernel_time(c, k) == Time::from_us(20));
  // The device-side gap between queued kernels is paid once per CUDA kernel: 10 x 2.1 us more.
  c.kernel_gap = Time::from_ns(2100);
  CHECK(kernel_time(c, k) == Time::from_us(41));
  KernelTimeCache cache(c);
  CHECK(cache.kernel_time(k) == Time::from_us(41));
  // A DtoD memcpy (0 kernels) moves its read + write bytes at memcpy_GBps, not at the Copy class
  // rate of copy kernels, and pays one gap as a queued op: 1,594 MB at 1,594 GB/s + 2.1 us; a
  // profile without memcpy_GBps prices it as a Copy kernel.
  c.class_bandwidth[KernelClass::Copy] = Bandwidth::from_gbps(797);
  c.memcpy = Bandwidth::from_gbps(1594);
  c.min_kernel_time = Time{};
  KernelSpec m = (memcpy_dtod("copy back w", Bytes{1'594'000'000}));
  CHECK(m.kernels == 0);
  CHECK(kernel_time(c, m) == Time::from_ms(1) + Time::from_ns(2100));
  CHECK(KernelTimeCache(c).kernel_time(m) == kernel_time(c, m));
  KernelSpec cat = (elementwise("flatten", Bytes{1'594'000'000}, "", KernelClass::Copy));
  CHECK(kernel_time(c, cat) == Time::from_ms(2) + Time::from_ns(2100));
  c.memcpy = Bandwidth{};
  CHECK(kernel_time(c, m) == Time::from_ms(2) + Time::from_ns(2100));
}

// Catches: an op over tensors the L2 cannot hold priced at a class rate measured on ones it can
// (the A800's elementwise 1,899 GB/s against BabelStream's 1,700), the cap applied to small
// tensors, to a class already slower, or without the profile declaring both numbers.
TEST_CASE("A memory-bound kernel over tensors larger than the L2 runs at most at the DRAM streaming rate", "[compute]") {
  ComputeProfile c;
  c.hbm = Bandwidth::from_gbps(2039);
  c.class_bandwidth[KernelClass::Elementwise] = Bandwidth::from_gbps(1900);
  c.class_bandwidth[KernelClass::Reduction] = Bandwidth::from_gbps(950);
  c.kernel_gap = Time{};
  c.min_kernel_time = Time{};
  KernelSpec add;
  add.cls = KernelClass::Elementwise;
  add.work.memory_bytes = Bytes{3'800'000'000};  // 3.8 GB: 2 ms at 1,900 GB/s
  add.work.tensor = Bytes{100 << 20};            // 100 MiB tensors
  CHECK(kernel_time(c, add) == Time::from_ms(2));
  c.l2_bytes = 40.0 * (1 << 20);
  CHECK(kernel_time(c, add) == Time::from_ms(2));  // no streaming rate declared
  c.dram_stream = Bandwidth::from_gbps(1520);
  CHECK(kernel_time(c, add) == Time::from_us(2500));  // 3.8 GB at 1,520 GB/s
  CHECK(KernelTimeCache(c).kernel_time(add) == Time::from_us(2500));
  // 32 MiB tensors stay in the L2: the class rate.
  KernelSpec small = add;
  small.work.tensor = Bytes{32 << 20};
  CHECK(kernel_time(c, small) == Time::from_ms(2));
  // Without a tensor size, half a kernel's bytes stand for it: 3.8 GB over one kernel streams,
  // 76 MB over one stays.
  KernelSpec unknown = add;
  unknown.work.tensor = Bytes{};
  CHECK(kernel_time(c, unknown) == Time::from_us(2500));
  unknown.work.memory_bytes = Bytes{76'000'000};
  CHECK(kernel_time(c, unknown) == Time::from_us(40));
  // A class slower than the streaming rate keeps its own.
  KernelSpec softmax = add;
  softmax.cls = KernelClass::Reduction;
  softmax.work.memory_bytes = Bytes{1'900'000'000};
  CHECK(kernel_time(c, softmax) == Time::from_ms(2));
  // A workload op's tensor is its output per kernel (a sum's, its input).
  KernelWork w;
  w.tensor = Bytes{5};
  KernelWork o;
  o.tensor = Bytes{9};
  w += o;
  CHECK(w.tensor == Bytes{9});
}

// Catches: a bool-output comparison on the non-vectorized path priced below a bf16 op of the same
// elements (bytes alone), or the element time applied to another class.
TEST_CASE("A non-vectorized elementwise kernel takes the longer of its bytes and its elements", "[compute]") {
  ComputeProfile c;
  c.hbm = Bandwidth::from_gbps(2000);
  c.class_bandwidth[KernelClass::ElementwiseStrided] = Bandwidth::from_gbps(1000);
  c.class_bandwidth[KernelClass::Elementwise] = Bandwidth::from_gbps(1000);
  KernelSpec eq;
  eq.cls = KernelClass::ElementwiseStrided;
  eq.work.memory_bytes = Bytes{300'000'000};  // 1e8 bf16 read, 1e8 bool written: 0.3 ms by bytes
  eq.work.elements = 100'000'000;
  CHECK(kernel_time(c, eq) == Time::from_us(300));
  // At 0.005 ns per element, 1e8 elements take 0.5 ms: the elements bind.
  c.strided_element_ns = 0.005;
  CHECK(kernel_time(c, eq) == Time::from_us(500));
  CHECK(KernelTimeCache(c).kernel_time(eq) == Time::from_us(500));
  // An fp32 op of the same elements (1.2 GB) is bound by its bytes: 1.2 ms.
  KernelSpec add32 = eq;
  add32.work.memory_bytes = Bytes{1'200'000'000};
  CHECK(kernel_time(c, add32) == Time::from_us(1200));
  // Other classes and kernels without elements are priced by bytes alone.
  KernelSpec vec = eq;
  vec.cls = KernelClass::Elementwise;
  CHECK(kernel_time(c, vec) == Time::from_us(300));
  // Elements computed through a dtype cast take the casting time, or the plain one without it:
  // 0.4e8 at 0.008 plus 0.6e8 at 0.005 = 0.62 ms.
  KernelSpec cast = eq;
  cast.work.cast_elements = 40'000'000;
  CHECK(kernel_time(c, cast) == Time::from_us(500));
  c.strided_cast_element_ns = 0.008;
  CHECK(kernel_time(c, cast) == Time::from_us(620));
  CHECK(KernelTimeCache(c).kernel_time(cast) == Time::from_us(620));
  eq.work.elements = 0;
  CHECK(kernel_time(c, eq) == Time::from_us(300));
  // Merged work keeps the elements of both.
  KernelWork w;
  w.elements = 5;
  w.cast_elements = 1;
  KernelWork o;
  o.elements = 7;
  o.cast_elements = 2;
  w += o;
  CHECK(w.elements == 12);
  CHECK(w.cast_elements == 3);
}

TEST_CASE("The host pays eager dispatch per forward op and autograd dispatch per backward op", "[compute]") {
  HostProfile h;
  h.launch_overhead = Time::from_us(10);
  h.eager_op_overhead = Time::from_us(62);
  h.autograd_op_overhead = Time::from_us(35);
  h.kernel_launch_overhead = Time::from_us(6);
  KernelSpec k;
  k.dispatch = HostDispatch::Eager;
  CHECK(launch_host_time(h, k) == Time::from_us(62));
  k.dispatch = HostDispatch::Autograd;
  k.kernels = 3;  // two more launches at 6 us
  CHECK(launch_host_time(h, k) == Time::from_us(47));
  k.dispatch = HostDispatch::Launch;
  k.kernels = 1;
  CHECK(launch_host_time(h, k) == Time::from_us(10));
}

TEST_CASE("The fp32 loss backward holds two fp32 logits-sized tensors at once", "[workload][memory]") {
  // log_softmax_backward_data allocates its fp32 grad_input while nll_loss's fp32 gradient (its
  // grad_output) is alive: 2 x T x V x 4 bytes, more than the fp32 gradient and its bf16 cast
  // (T x V x 6). llama2-7b, 1 x 2048 tokens, vocab 32,000.
  Workload w = build_transformer("llama2-7b", preset_dims("llama2-7b"), 1, 2048, Dtype::BF16, preset_options("llama2-7b"));
  CHECK(w.layers.back().kind == LayerKind::Head);
  CHECK(w.layers.back().recompute_activations.count == 2LL * 2048 * 32000 * 4);
}

namespace {

// Kernels per class over a list of ops, indexed by KernelClass.
std::array<int, kKernelClassCount> per_class(const std::vector<Op>& ops) {
  std::array<int, kKernelClassCount> n{};
  for (const auto& o : ops) n[static_cast<std::size_t>(o.cls)] += o.kernels;
  return n;
}

std::array<int, kKernelClassCount> classes(std::initializer_list<std::pair<KernelClass, int>> l) {
  std::array<int, kKernelClassCount> n{};
  for (auto [c, k] : l) n[static_cast<std::size_t>(c)] = k;
  return n;
}

const Layer& layer_of(const Workload& w, LayerKind k) {
  for (const auto& l : w.layers)
    if (l.kind == k) return l;
  throw std::logic_error("no such layer");
}

}  // namespace

TEST_CASE("HF eager OPT launches per class the kernels of the li-plus DeepSpeed-Chat trace, layer by layer", "[workload]") {
  // Read off the li-plus ZeRO-1 trace (rank 0, ProfilerStep#11), each kernel attributed to its
  // aten op through the launch's correlation id and classed as `analyze` classes it
  // (trace_kernel_class). Per decoder layer:
  //  forward  gemm 8 (q, k, v, out, fc1, fc2 addmm + QK^T and PV bmm); elementwise 6 (q * scaling,
  //           2 dropout, 2 residual add, relu); strided 6 (k, v, q contiguous, mask add, torch.max
  //           clamp, reshape copy); norm 2; reduction 1 (softmax) = 23.
  //  backward gemm 16 (2 per linear, 4 bmm); elementwise 12 (2 dropout bwd, relu bwd, softmax's
  //           grad*out mul, div/where/masked_fill of MaximumBackward0, q-scale mul, 2 q/k/v grad
  //           adds, 2 residual grad adds after the norms); reduction 7 (6 bias-grad sums of
  //           AddmmBackward0, softmax backward); strided 6 (out grad copy, eq and lt of
  //           MaximumBackward0, 2 ViewBackward0 copies after the bmms, k reshape copy); norm 4 = 45.
  Workload w = opt13(preset_options("opt-1.3b"));
  const Layer& b = first_block(w);
  using K = KernelClass;
  CHECK(per_class(all_forward(b)) ==
        classes({{K::Gemm, 8}, {K::Elementwise, 6}, {K::ElementwiseStrided, 6}, {K::Norm, 2}, {K::Reduction, 1}}));
  CHECK(per_class(all_backward(b)) ==
        classes({{K::Gemm, 16}, {K::Elementwise, 12}, {K::ElementwiseStrided, 6}, {K::Norm, 4}, {K::Reduction, 7}}));

  // Embedding forward: the 4-D causal mask (13: fill, add, sub, 3 masked_fill vectorized; arange,
  // lt, 5 copies strided), index_select for tokens and positions, the positions' cumsum (a scan:
  // reduction) and mul, sub, add, and the embeddings' sum = 20 kernels.
  const Layer& e = layer_of(w, LayerKind::Embedding);
  CHECK(per_class(all_forward(e)) ==
        classes({{K::Elementwise, 10}, {K::ElementwiseStrided, 7}, {K::Reduction, 1}, {K::Embedding, 2}}));
  // ... from 19 eager aten calls, each dispatched from Python (the trace's embedding, full,
  // arange, add, lt, masked_fill_, to, to, rsub, to, masked_fill, to, masked_fill, cumsum, mul,
  // sub, add, embedding, add), of which the two out-of-place masked_fills also launch a fill
  // (Op::continues_previous) after their clone (a DtoD memcpy, then a strided copy).
  int dispatched = 0, continued = 0;
  for (const Op& op : all_forward(e)) (op.continues_previous ? continued : dispatched) += 1;
  CHECK(dispatched == 19);
  CHECK(continued == 2);
  // Embedding backward, twice (tokens, positions): arange (strided), zeros of the weight grad
  // (elementwise), 19 sort/segment/scatter kernels; plus the tied weight's two gradients summed
  // (one add) = 2 x 21 + 1 = 43.
  CHECK(per_class(all_backward(e)) == classes({{K::Elementwise, 3}, {K::ElementwiseStrided, 2}, {K::Embedding, 38}}));

  // Final LayerNorm: 1 forward, 2 backward kernels (no grad add: its input is the residual stream only).
  const Layer& n = layer_of(w, LayerKind::Norm);
  CHECK(per_class(all_forward(n)) == classes({{K::Norm, 1}}));
  CHECK(per_class(all_backward(n)) == classes({{K::Norm, 2}}));

  // Head: lm_head mm, shift_logits and shift_labels copies (strided), log_softmax and nll_loss
  // (reduction) = 5; backward: nll_loss_backward's zeros + scatter kernel, log_softmax backward,
  // two slice_backward zeros + the strided copy, lm_head's two mm = 8.
  const Layer& h = layer_of(w, LayerKind::Head);
  CHECK(per_class(all_forward(h)) == classes({{K::Gemm, 1}, {K::ElementwiseStrided, 2}, {K::Reduction, 2}}));
  CHECK(per_class(all_backward(h)) ==
        classes({{K::Gemm, 2}, {K::Elementwise, 3}, {K::ElementwiseStrided, 1}, {K::Reduction, 2}}));

  // The model's kernels per step: 24 x (23 + 45) + 20 + 43 + 3 + 13 = 1,711 of the trace's 1,824
  // non-NCCL kernels. The other 113 are DeepSpeed's, not the model's (engine.backward's loss.mean
  // and the loss-scaler's float/mul/backward seed: 6; ZeRO's step: 41 per-gradient
  // .double().norm(2) pairs, flatten cats, div_, fp32/bf16 copies, mul_, 9 FusedAdam launches).
  int total = 0;
  for (const auto& l : w.layers) total += l.forward_kernels() + l.backward_kernels();
  CHECK(total == 1711);
}

TEST_CASE("OPT's eager attention copies its clamp value from pageable memory: a host sync before the max", "[workload]") {
  // modeling_opt.py: torch.max(w, torch.tensor(torch.finfo(w.dtype).min, device=w.device)).
  int syncs = 0;
  const Workload opt = opt13(preset_options("opt-1.3b"));
  for (const auto& m : first_block(opt).modules)
    for (const auto& op : m.forward)
      if (op.host_sync_before) {
        CHECK(op.name == "scores.max_clamp");
        ++syncs;
      }
  CHECK(syncs == 1);
  WorkloadOptions llama = preset_options("llama3-8b");
  llama.attention = Attention::Eager;
  const Workload eager_llama = build_transformer("llama3-8b", preset_dims("llama3-8b"), 1, 2048, Dtype::BF16, llama);
  for (const auto& m : first_block(eager_llama).modules)
    for (const auto& op : m.forward) CHECK_FALSE(op.host_sync_before);
}

// Catches: a non-vectorized op built without its elements (priced by bytes alone, so OPT's eq/lt
// with bool outputs come out a quarter cheaper than the trace's 382/400 us), or counted twice.
TEST_CASE("Every non-vectorized op of a block carries the elements it computes", "[workload]") {
  const std::int64_t S2 = std::int64_t{8} * 32 * 512 * 512;  // OPT-1.3B, batch 8, sequence 512: b x H x s^2
  const Workload opt = opt13(preset_options("opt-1.3b"));
  int strided = 0;
  for (const Op& op : all_forward(first_block(opt)))
    if (op.cls == KernelClass::ElementwiseStrided) {
      CHECK(op.work.elements > 0);
      ++strided;
    }
  for (const Op& op : all_backward(first_block(opt))) {
    if (op.cls != KernelClass::ElementwiseStrided) continue;
    CHECK(op.work.elements > 0);
    ++strided;
    // MaximumBackward0's eq and lt: two kernels of b x H x s^2 elements each, 3 bytes per element.
    // Against the float32 0-dim tensor: every element cast; no other strided op casts.
    if (op.name == "max_clamp.bwd.compare") {
      CHECK(op.work.tensor == Bytes{S2});  // each kernel's bool output
      CHECK(op.work.elements == 2 * S2);
      CHECK(op.work.cast_elements == 2 * S2);
      CHECK(op.work.memory_bytes == Bytes{6 * S2});
    } else {
      CHECK(op.work.cast_elements == 0);
    }
  }
  CHECK(strided >= 6);
  for (const Op& op : all_forward(first_block(opt)))
    if (op.cls == KernelClass::ElementwiseStrided) CHECK(op.work.cast_elements == (op.name == "scores.max_clamp" ? S2 : 0));
}

TEST_CASE("Llama's SwiGLU runs in the order eager Python and the autograd engine run it", "[workload]") {
  // `w2(F.silu(w1(x)) * w3(x))`: forward w1, silu, w3, mul, w2. Backward, the engine takes the
  // ready node created last first: mul's gradient, w3's MmBackward0, SiluBackward0, w1's, and x's
  // two gradients meet after w1's. Compiled: both GEMMs, then the fused silu * mul.
  const auto mlp_sequence = [](bool compile, bool forward) {
    WorkloadOptions o = preset_options("llama3-8b");
    o.compile = compile;
    const Layer l = first_block(build_transformer("llama3-8b", preset_dims("llama3-8b"), 1, 2048, Dtype::BF16, o));
    std::vector<std::string> seq;
    const auto visit = [&](const Module& m) {
      if (m.name.find(".mlp.") == std::string::npos || m.name.find("mlp_norm") != std::string::npos) return;
      const std::string mod = m.name.substr(m.name.find(".mlp.") + 5);
      for (const Op& op : forward ? m.forward : m.backward) seq.push_back(mod + " " + op.name);
    };
    if (forward)
      for (const Module& m : l.modules) visit(m);
    else
      for (auto m = l.modules.rbegin(); m != l.modules.rend(); ++m) visit(*m);
    return seq;
  };
  using V = std::vector<std::string>;
  CHECK(mlp_sequence(false, true) ==
        V{"gate_proj linear", "act_fn silu", "up_proj linear", "act mul", "down_proj linear", "down_proj residual_add"});
  CHECK(mlp_sequence(false, false) ==
        V{"down_proj linear.dgrad", "down_proj linear.wgrad", "act mul.bwd", "up_proj linear.dgrad",
          "up_proj linear.wgrad", "act_fn silu.bwd", "gate_proj linear.dgrad", "gate_proj linear.wgrad",
          "gate_proj grad_accumulate"});
  const V compiled = mlp_sequence(true, true);
  REQUIRE(compiled.size() == 5);
  CHECK(compiled[0] == "gate_proj linear");
  CHECK(compiled[1] == "up_proj linear");
  CHECK(compiled[2] == "act fused(silu+mul)");
}

TEST_CASE("A fused attention op carries the model's head dimension", "[workload][attention]") {
  // MPT-30B's d_model 7168 in 64 heads of 112 (llm-foundry's benchmark yaml has 56 of 128).
  ModelDims dims = preset_dims("mpt-30b");
  dims.heads = dims.kv_heads = 64;
  const Layer b = first_block(build_transformer("mpt-30b", dims, 1, 2048, Dtype::BF16, preset_options("mpt-30b")));
  int seen = 0;
  for (const Module& m : b.modules)
    for (const auto* ops : {&m.forward, &m.backward})
      for (const Op& op : *ops)
        if (op.work.attention.flops.count > 0) {
          CHECK(op.work.attention.head_dim == 112);  // 7,168 / 64 heads
          CHECK(op.work.attention.kernel == AttentionKernel::FlashTriton);
          ++seen;
        }
  CHECK(seen == 2);
}

// Catches: an HF Trainer run charged for logits its compute_loss never keeps, or the loop
// unnamed in the results.
TEST_CASE("The training loop decides whether the logits outlive the forward: HF Trainer's compute_loss returns only the loss",
          "[workload][config][memory]") {
  auto build = [](nlohmann::json extra) {
    nlohmann::json wl = {{"preset", "opt-125m"}, {"seq_len", 128}, {"micro_batch", 2}};
    for (auto it = extra.begin(); it != extra.end(); ++it) wl[it.key()] = it.value();
    nlohmann::json d = {{"workload", wl},
                        {"cluster", {{"profile", std::string(STEPSIM_SOURCE_DIR) + "/configs/hardware/toy-ideal.json"}, {"nodes", 1}, {"gpus_per_node", 8}}},
                        {"strategy", {{"framework", "ddp"}}}};
    return *test::experiment_from_doc(d).workload;
  };
  // hf's default loop is a script's (DeepSpeed-Chat step 1, the *_no_trainer examples:
  // `outputs = model(**batch)` alive until the next forward): OPT's bf16 logits, 2 x 128 tokens x
  // 50,272 x 2 B = 25,739,264 B.
  const Workload script = build(nlohmann::json::object());
  CHECK(effective_workload(script)["training_loop"] == "hf_script");
  CHECK(effective_workload(script)["loop_keeps_output"] == true);
  CHECK(script.kept_output.count == 2LL * 128 * 50272 * 2);
  // transformers Trainer.training_step: `loss = self.compute_loss(model, inputs)`, whose
  // `outputs = model(**inputs)` is a local it drops, returning the loss only
  // (src/transformers/trainer.py compute_loss): nothing logits-sized is kept.
  const Workload trainer = build({{"training_loop", "hf_trainer"}});
  CHECK(effective_workload(trainer)["training_loop"] == "hf_trainer");
  CHECK(effective_workload(trainer)["loop_keeps_output"] == false);
  CHECK(trainer.kept_output.count == 0);
  // An explicit loop_keeps_output still wins over the loop's default.
  CHECK(build({{"training_loop", "hf_trainer"}, {"loop_keeps_output", true}}).kept_output.count == 2LL * 128 * 50272 * 2);
  // A loop that is not one of the five is refused, naming the key and the choices.
  try {
    build({{"training_loop", "trainer"}});
    FAIL("accepted an unknown training loop");
  } catch (const InputError& err) {
    CHECK_THAT(err.what(), Catch::Contains("/workload/training_loop") && Catch::Contains("hf_trainer"));
  }
}

// Catches: a flash_attn release read but not applied, or a non-2.x release accepted for `flash`.
TEST_CASE("workload.flash_attn_version is a flash_attn 2.x release, shown for flash", "[workload][config][attention]") {
  auto build = [](nlohmann::json extra) {
    nlohmann::json wl = {{"model", {{"family", "llama"}, {"hidden", 1600}, {"layers", 2}, {"heads", 8}, {"ffn", 4096}, {"vocab", 1000}}},
                         {"seq_len", 128}, {"attention", "flash"}};
    for (auto it = extra.begin(); it != extra.end(); ++it) wl[it.key()] = it.value();
    nlohmann::json d = {{"workload", wl},
                        {"cluster", {{"profile", std::string(STEPSIM_SOURCE_DIR) + "/configs/hardware/toy-ideal.json"}, {"nodes", 1}, {"gpus_per_node", 8}}},
                        {"strategy", {{"framework", "ddp"}}}};
    return *test::experiment_from_doc(d).workload;
  };
  // Heads of 1600 / 8 = 200: the 224 kernel up to flash_attn 2.6.1, the 256 one from 2.6.2
  // (Dao-AILab/flash-attention 751c762c); the op carries the release.
  auto attention_release = [](const Workload& w) {
    for (const auto& m : w.layers[1].modules)
      for (const auto& op : m.forward)
        if (op.cls == KernelClass::Attention) return op.work.attention.flash_attn;
    return Release{};
  };
  CHECK(attention_release(build(nlohmann::json::object())) == kDefaultFlashAttnRelease);
  const Workload old = build({{"flash_attn_version", "2.5.8"}});
  CHECK(attention_release(old) == Release{2, 5, 8});
  CHECK(effective_workload(old)["flash_attn_version"] == "2.5.8");
  CHECK(effective_workload(build(nlohmann::json::object()))["flash_attn_version"] == "2.8.3");
  CHECK_FALSE(effective_workload(build({{"attention", "sdpa_flash"}})).contains("flash_attn_version"));
  auto message = [&](nlohmann::json v) {
    try {
      build({{"flash_attn_version", v}});
    } catch (const InputError& err) {
      return std::string(err.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(message("3.0"), Catch::Contains("/workload/flash_attn_version") && Catch::Contains("flash_attn 2.x"));
  CHECK_THAT(message("latest"), Catch::Contains("/workload/flash_attn_version") && Catch::Contains("\"latest\""));
}
