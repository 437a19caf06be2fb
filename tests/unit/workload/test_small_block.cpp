// One small transformer, worked by hand: the op list of an MPT block (llm-foundry: LayerNorm,
// fused Wqkv with bias, triton flash attention, GELU, no dropout), the FLOPs of each op, the
// bytes autograd saves, and what the attention and activation-checkpointing knobs change.
//
// Dimensions: hidden h = 64, 4 heads of d = 16 (kv heads 4), ffn I = 256, vocab V = 100,
// 2 layers; micro-batch b = 2, seq s = 8, so T = b s = 16 tokens; bf16 (e = 2 B).
// A [T, h] activation is T h e = 16 * 64 * 2 = 2048 B; a [T, I] one 16 * 256 * 2 = 8192 B.
#include <catch2/catch.hpp>

#include <optional>
#include <string>
#include <vector>

#include "sim/workload/workload.hpp"

using namespace stepsim;

namespace {

ModelDims small_mpt() {
  ModelDims d;
  d.family = "mpt";
  d.hidden = 64;
  d.layers = 2;
  d.heads = 4;
  d.kv_heads = 4;
  d.ffn = 256;
  d.vocab = 100;
  d.tied_embeddings = true;
  return d;
}

Workload build(const WorkloadOptions& o) { return build_transformer("small-mpt", small_mpt(), 2, 8, Dtype::BF16, o); }
Workload build_default() { return build(default_options("mpt")); }

// The forward ops of a layer, in launch order.
std::vector<Op> forward_ops(const Layer& l) {
  std::vector<Op> ops;
  for (const auto& m : l.modules) ops.insert(ops.end(), m.forward.begin(), m.forward.end());
  return ops;
}

std::vector<std::string> names(const std::vector<Op>& ops) {
  std::vector<std::string> out;
  for (const auto& o : ops) out.push_back(o.name);
  return out;
}

double gemm_flops(const Op& o) {
  double f = 0;
  for (const auto& g : o.work.gemms) f += g.flops().count;
  return f;
}

double gemm_flops(const std::vector<Op>& ops) {
  double f = 0;
  for (const auto& o : ops) f += gemm_flops(o);
  return f;
}

const Op& op_named(const std::vector<Op>& ops, const std::string& name, int nth = 0) {
  for (const auto& o : ops)
    if (o.name == name && nth-- == 0) return o;
  FAIL("no op " << name);
  throw std::logic_error("unreachable");
}

}  // namespace

// Catches: an op added, dropped or reordered in the MPT block, a GEMM with the wrong shape
// (a transposed m/n/k changes the pricing), and attention FLOPs that lose the causal halving.
TEST_CASE("A small MPT block launches the ops llm-foundry's modules do, with the FLOPs of their shapes", "[workload]") {
  const Workload w = build_default();
  // embed, block.0, block.1, norm, head.
  REQUIRE(w.layers.size() == 5);
  const Layer& b = w.layers[1];
  CHECK(b.kind == LayerKind::Block);
  const std::vector<Op> f = forward_ops(b);
  CHECK(names(f) == std::vector<std::string>{"layer_norm", "linear", "attention", "linear", "residual_add", "layer_norm", "linear",
                                             "gelu", "linear", "residual_add"});
  CHECK(b.forward_kernels() == 10);  // one CUDA kernel per op
  // Linear FLOPs = 2 T in out:
  //   Wqkv    16 x 192 x 64 (out = h + 2 kv = 192): 2 * 16 * 192 * 64 = 393,216
  //   out     16 x 64 x 64:                          2 * 16 * 64 * 64  = 131,072
  //   fc1     16 x 256 x 64:                         2 * 16 * 256 * 64 = 524,288
  //   fc2     16 x 64 x 256:                                             524,288
  CHECK(op_named(f, "linear", 0).work.gemms.front() == GemmShape{16, 192, 64, 1, Dtype::BF16, GemmLayout::TN});  // x W^T: cuBLAS tn
  CHECK(gemm_flops(op_named(f, "linear", 0)) == 393'216);
  CHECK(gemm_flops(op_named(f, "linear", 1)) == 131'072);
  CHECK(gemm_flops(op_named(f, "linear", 2)) == 524'288);
  CHECK(op_named(f, "linear", 3).work.gemms.front() == GemmShape{16, 64, 256, 1, Dtype::BF16, GemmLayout::TN});
  CHECK(gemm_flops(op_named(f, "linear", 3)) == 524'288);
  // = 2 T x (weights of the four linears) = 2 * 16 * 49,152 = 1,572,864.
  CHECK(gemm_flops(f) == 1'572'864);
  // Backward: dgrad and wgrad each repeat the forward GEMM's FLOPs: 2 x 1,572,864.
  std::vector<Op> bwd;
  for (const auto& m : b.modules) bwd.insert(bwd.end(), m.backward.begin(), m.backward.end());
  CHECK(gemm_flops(bwd) == 2 * 1'572'864);
  // ...as cuBLAS runs them: the input gradient dy W as nn, the weight gradient dy^T x as nt.
  CHECK(op_named(bwd, "linear.dgrad").work.gemms.front().layout == GemmLayout::NN);
  CHECK(op_named(bwd, "linear.wgrad").work.gemms.front().layout == GemmLayout::NT);
  // Causal flash attention: QK^T and PV are 2 b s^2 h each, halved by the causal mask:
  // 2 * 2 * 8 * 8 * 64 = 16,384 forward; backward five such matmuls, halved: 5 b s^2 h = 40,960.
  const Op& attn = op_named(f, "attention");
  CHECK(attn.cls == KernelClass::Attention);
  CHECK(attn.work.attention.flops.count == 16'384);
  CHECK(op_named(bwd, "attention.bwd").work.attention.flops.count == 40'960);
  CHECK(op_named(bwd, "attention.bwd").kernels == 2);  // the triton kernel's backward: two launches
  // Backward kernels: LayerNorm bwd 2 + the residual-stream grad add 1; Wqkv dgrad, wgrad, bias
  // sum 3; attention 2; out 3; LayerNorm 2 + grad add 1; GELU bwd + fc1's 3 = 4; fc2 3: 21.
  CHECK(b.backward_kernels() == 21);
  // Parameters: LayerNorms 2 x (64 + 64), Wqkv 64 * 192 + 192, out 64 * 64 + 64,
  // fc1 64 * 256 + 256, fc2 256 * 64 + 64 = 49,984 per block; embeddings 100 * 64 (tokens,
  // tied with the head) + 8 * 64 (learned positions, max_seq_len = s rows); final norm 128.
  CHECK(b.numel() == 49'984);
  CHECK(w.numel() == 6'400 + 512 + 2 * 49'984 + 128);
  // The head: logits 16 x 100 from h = 64: 2 * 16 * 100 * 64 = 204,800 FLOPs.
  CHECK(gemm_flops(forward_ops(w.layers[4])) == 204'800);
}

// Catches: a saved tensor dropped or counted twice (the peak-memory prediction moves with
// every byte here), and the embedding or head saving the wrong tensors.
TEST_CASE("The small MPT block saves exactly the tensors its backward needs", "[workload][memory]") {
  const Workload w = build_default();
  // Per block: LayerNorm input + fp32 mean/rstd (2048 + 16 * 8) twice; Wqkv's input 2048;
  // the attention kernel's q, k, v, out (4 x 2048) and fp32 log-sum-exp (b H s 4 = 256);
  // out_proj's input is that same out (llm-foundry attention.py: `attn_output.view(...)`, one
  // storage), not counted again; fc1's input 2048; GELU's input 8192; fc2's input 8192.
  const std::int64_t ln = 2048 + 128, attn = 4 * 2048 + 256;
  const std::int64_t block = ln + 2048 + attn + ln + 2048 + 8192 + 8192;
  CHECK(block == 33'280);
  CHECK(w.layers[1].saved_activations.count == block);
  CHECK(w.layers[2].saved_activations.count == block);
  CHECK(w.layers[1].recompute.empty());
  // The embedding keeps the int64 token ids (16 x 8 B); the head its input (2048) and the fused
  // cross entropy's fp32 log-sum-exp (16 x 4 B); the bf16 logits it also saves are the tensor
  // Composer keeps as the model's output (loop_keeps_output, llm-foundry's default): counted there.
  CHECK(w.layers[0].saved_activations.count == 128);
  CHECK(w.layers[4].saved_activations.count == 2048 + 64);
  CHECK(w.kept_output.count == 16 * 100 * 2);
}

// Catches: llm-foundry's loss priced (and held in memory) as an fp32 upcast. Its default
// loss_fn is flash_attn's fused cross entropy (modeling_mpt.py at c6cfb4284 l.711): one
// xentropy kernel over the bf16 logits each way, no fp32 copy of them, the bf16 logits
// gradient the only logits-sized transient of backward.
TEST_CASE("llm-foundry's fused cross entropy reads the bf16 logits once each way and copies none to fp32", "[workload][memory]") {
  const Workload w = build_default();
  const Layer& head = w.layers[4];
  const Module& loss = head.modules.back();
  std::vector<std::string> fwd, bwd;
  for (const auto& op : loss.forward) fwd.push_back(op.name);
  for (const auto& op : loss.backward) bwd.push_back(op.name);
  CHECK(fwd == std::vector<std::string>{"xentropy", "losses.masked_fill", "loss.mean"});
  CHECK(bwd == std::vector<std::string>{"loss.mean.bwd", "grad_loss.masked_fill", "xentropy.bwd"});
  const std::int64_t logits = 16 * 100 * 2;  // T x V bf16
  CHECK(loss.forward.front().read.count == logits + 16 * 8);   // the logits and the int64 labels
  CHECK(loss.forward.front().written.count == 16 * 8);         // fp32 losses and log-sum-exp
  CHECK(loss.backward.back().written.count == logits);         // the bf16 logits gradient
  for (const auto& op : loss.forward) CHECK(op.written.count < logits);  // nothing logits-sized is written
  CHECK(head.recompute_activations.count == logits);
  // A loop that drops the output leaves the saved logits to the loss.
  WorkloadOptions o = default_options("mpt");
  o.loop_keeps_output = false;
  const Workload dropped = build(o);
  CHECK(dropped.kept_output.count == 0);
  CHECK(dropped.layers[4].saved_activations.count == 2048 + 64 + logits);
}

// Catches: eager attention losing its s x s score tensors (its memory cost) or the batched
// GEMMs of QK^T and PV, and the flash kernel being priced as eager.
TEST_CASE("Eager attention runs the s x s scores through batched GEMMs and saves the probabilities", "[workload]") {
  WorkloadOptions o = default_options("mpt");
  o.attention = Attention::Eager;
  const Workload w = build(o);
  const std::vector<Op> f = forward_ops(w.layers[1]);
  // Wqkv, then contiguous k and v copies for the batched matmuls, q's copy, QK^T, scale, mask,
  // softmax, PV, and the transposed output made contiguous for out_proj.
  CHECK(names(f) == std::vector<std::string>{"layer_norm", "linear", "k.contiguous", "v.contiguous", "q.contiguous", "bmm.qk",
                                             "scores.div_scale", "scores.mask_add", "softmax", "bmm.pv", "out.transpose_contiguous",
                                             "linear", "residual_add", "layer_norm", "linear", "gelu", "linear", "residual_add"});
  // QK^T: b H = 8 batches of [8 x 16] x [16 x 8]: 2 * 8 * 8 * 16 * 8 = 16,384; PV the same.
  // Both in full (no causal halving): twice what flash is credited with.
  CHECK(op_named(f, "bmm.qk").work.gemms.front() == GemmShape{8, 8, 16, 8, Dtype::BF16});
  CHECK(gemm_flops(op_named(f, "bmm.qk")) + gemm_flops(op_named(f, "bmm.pv")) == 2 * 16'384);
  for (const auto& op : f) CHECK(op.work.attention.flops.count == 0);
  // Saved: the q, k, v copies (3 x 2048) and the bf16 probabilities (b H s s e = 8 * 64 * 2 =
  // 1024) instead of flash's q, k, v, out and log-sum-exp (4 x 2048 + 256): 1280 B less.
  CHECK(w.layers[1].saved_activations.count == 35'328 - 1280);
}

// Catches: a checkpointing policy that keeps the wrong tensors or recomputes the wrong ops
// (the memory/time trade the user asked for is then not the one predicted).
TEST_CASE("Activation checkpointing policies keep and recompute what their definitions say on the small block",
          "[workload][memory]") {
  const std::int64_t all = 33'280;  // the block's saved bytes without checkpointing (above)
  auto block = [](Checkpointing c, int every = 1) {
    WorkloadOptions o = default_options("mpt");
    o.checkpointing = c;
    o.checkpoint_every = every;
    o.checkpoint_early_stop = false;  // the whole forward again (the reentrant variant); early stop: below
    return build(o);
  };
  // full: only the block input [T, h] (2048 B) stays; backward re-runs all 10 forward ops,
  // holding their 33,280 B transiently.
  const Workload full = block(Checkpointing::Full);
  CHECK(full.layers[1].saved_activations.count == 2048);
  CHECK(names(full.layers[1].recompute) == names(forward_ops(full.layers[1])));
  CHECK(full.layers[1].recompute_activations.count == all);
  CHECK(full.layers[1].backward_kernels() == 21 + 10);
  // selective (Korthikanti et al.): recompute the attention core, keep its inputs q, k, v:
  // 33,280 - 8448 (the kernel's saves) + 6144 (q, k, v) = 30,976.
  const Workload sel = block(Checkpointing::Selective);
  CHECK(sel.layers[1].saved_activations.count == all - 8448 + 6144);
  CHECK(names(sel.layers[1].recompute) == std::vector<std::string>{"attention"});
  CHECK(sel.layers[1].recompute_activations.count == 8448);
  // op_sac (torchtitan): keep the block input, the outputs of the 1st and 3rd matmul (Wqkv
  // [16, 192] = 6144 B, fc1 [16, 256] = 8192 B) and the attention output (2048 + 256 lse):
  // 2048 + 6144 + 8192 + 2304 = 18,688; recompute the other 7 ops.
  const Workload sac = block(Checkpointing::OpSac);
  CHECK(sac.layers[1].saved_activations.count == 18'688);
  CHECK(sac.layers[1].recompute_activations.count == all - 18'688);
  CHECK(names(sac.layers[1].recompute) ==
        std::vector<std::string>{"layer_norm", "linear", "residual_add", "layer_norm", "gelu", "linear", "residual_add"});
  // every_k with k = 2: the 2nd block (block 1) fully checkpointed, the 1st not (torchtitan counts
  // from 1).
  const Workload k2 = block(Checkpointing::EveryK, 2);
  CHECK(k2.layers[2].saved_activations.count == 2048);
  CHECK(k2.layers[1].saved_activations.count == all);
  CHECK(k2.layers[1].recompute.empty());
  // Checkpointing never touches the embedding or the head.
  CHECK(full.layers[0].saved_activations == build_default().layers[0].saved_activations);
  CHECK(full.layers[4].saved_activations == build_default().layers[4].saved_activations);
}

// Catches: a recompute that runs ops no gradient needs under non-reentrant checkpointing (PyTorch
// 2.1 on) or torch.compile, or one that stops before a tensor the backward reads.
TEST_CASE("Early stop ends a checkpointed block's recompute at its last saved tensor", "[workload][memory]") {
  const std::int64_t all = 33'280;
  auto block = [](Checkpointing c, std::optional<bool> early_stop, std::optional<Release> torch = {}, bool compile = false) {
    WorkloadOptions o = default_options("mpt");
    o.checkpointing = c;
    o.checkpoint_early_stop = early_stop;
    o.torch_version = torch;
    o.compile = compile;
    return build(o);
  };
  // The block's last op to save a tensor is fc2 (it saves the GELU output, packed before its
  // kernel): the recompute runs the 8 ops before it; fc2 and the residual add never run again.
  // The same tensors are saved again: the transient bytes do not change.
  const Workload full = block(Checkpointing::Full, true);
  CHECK(names(full.layers[1].recompute) ==
        std::vector<std::string>{"layer_norm", "linear", "attention", "linear", "residual_add", "layer_norm", "linear", "gelu"});
  CHECK(full.layers[1].recompute_activations.count == all);
  CHECK(full.layers[1].saved_activations.count == 2048);
  CHECK(full.layers[1].backward_kernels() == 21 + 8);
  // op_sac recomputes fc2 (the 4th matmul; the 1st and 3rd are kept); early stop drops it and
  // the residual add after it. (In Llama's block the 7th matmul, w2, is kept: only the add goes.)
  const Workload sac = block(Checkpointing::OpSac, true);
  CHECK(names(sac.layers[1].recompute) == std::vector<std::string>{"layer_norm", "linear", "residual_add", "layer_norm", "gelu"});
  CHECK(sac.layers[1].saved_activations.count == 18'688);
  // Selective's region is the attention core, whose kernel saves its own outputs: it runs.
  CHECK(names(block(Checkpointing::Selective, true).layers[1].recompute) == std::vector<std::string>{"attention"});
  // Unset: no implementation stops early. llm-foundry's runs checkpoint reentrantly unless their
  // yaml says otherwise (Composer's default, composer v0.15.0 dist_strategy.py l.129; train.py at
  // c6cfb4284 l.71-83 forces reentrant for plain MPT), whatever the PyTorch release; hf, megatron
  // (reentrant) and torchtitan (early_stop=False) never. The whole block, 10 ops, runs again.
  CHECK(block(Checkpointing::Full, {}).layers[1].recompute.size() == 10);
  CHECK(block(Checkpointing::Full, {}, Release{2, 0}).layers[1].recompute.size() == 10);
  CHECK(block(Checkpointing::Full, {}, Release{2, 1}).layers[1].recompute.size() == 10);
  for (const char* family : {"llama", "opt", "gpt"}) {
    WorkloadOptions o = default_options(family);
    INFO(family);
    CHECK_FALSE(checkpoint_stops_early(o));
    o.checkpoint_early_stop = true;
    CHECK(checkpoint_stops_early(o));
  }
  WorkloadOptions megatron = default_options("mpt");
  megatron.impl = Implementation::Megatron;
  CHECK_FALSE(checkpoint_stops_early(megatron));
  // torch.compile's partitioner recomputes only what the backward graph reads, whatever the
  // eager setting: fc2 (a GEMM, not fused) and the fused run after it are left out.
  const Workload compiled = block(Checkpointing::Full, false, {}, true);
  const Workload compiled_noac = block(Checkpointing::None, false, {}, true);
  const auto fwd = names(forward_ops(compiled_noac.layers[1]));
  REQUIRE(fwd.size() >= 3);
  CHECK(fwd[fwd.size() - 2] == "linear");
  CHECK(names(compiled.layers[1].recompute) == std::vector<std::string>(fwd.begin(), fwd.end() - 2));
}
