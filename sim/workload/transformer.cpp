// Transformer layers as the ops their implementation launches (HF transformers eager/sdpa,
// torchtitan, llm-foundry MPT, Megatron-style GPT): per op its kernel count, GEMM shapes, bytes
// read and written, and the tensors autograd saves; checkpointing policies on top.
//
// Op lists were read off real traces (structure only, no timing): HF OPT eager from the li-plus
// DeepSpeed-Chat OPT-1.3B traces (23 kernels per block forward, 45 backward, memsets left out as
// `analyze` does), Megatron GPT from the li-plus Megatron trace; the others from the modules'
// source (cited at each builder).
#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <string_view>

#include "sim/workload/workload.hpp"

namespace stepsim {

std::int64_t Module::numel() const {
  std::int64_t n = 0;
  for (const auto& p : params) n += p.numel;
  return n;
}

std::int64_t Layer::numel() const {
  std::int64_t n = 0;
  for (const auto& m : modules) n += m.numel();
  return n;
}

KernelWork Layer::forward() const {
  KernelWork w;
  for (const auto& m : modules)
    for (const auto& o : m.forward) w += o.work;
  return w;
}

int Layer::forward_kernels() const {
  int n = 0;
  for (const auto& m : modules)
    for (const auto& o : m.forward) n += o.kernels;
  return n;
}

int Layer::backward_kernels() const {
  int n = 0;
  for (const auto& o : recompute) n += o.kernels;
  for (const auto& m : modules)
    for (const auto& o : m.backward) n += o.kernels;
  return n;
}

Layer::ParamList Layer::params() const {
  ParamList out;
  for (const auto& m : modules)
    for (const auto& p : m.params) out.push_back(&p);
  return out;
}

std::int64_t Layer::param_count() const {
  std::int64_t n = 0;
  for (const auto& m : modules) n += static_cast<std::int64_t>(m.params.size());
  return n;
}

std::int64_t Workload::param_count() const {
  std::int64_t n = 0;
  for (const auto& l : layers) n += l.param_count();
  return n;
}

std::int64_t Workload::autograd_nodes() const {
  if (toy) return 0;  // fixed-time layers: no graph modelled
  std::int64_t n = 0;
  for (const auto& l : layers) n += l.autograd_nodes + l.param_count();
  return n;
}

std::int64_t Workload::numel() const {
  std::int64_t n = 0;
  for (const auto& l : layers) n += l.numel();
  return n;
}

std::string to_string(LayerKind k) {
  switch (k) {
    case LayerKind::Embedding: return "embedding";
    case LayerKind::Block: return "block";
    case LayerKind::Norm: return "norm";
    case LayerKind::Head: return "head";
  }
  return "block";
}

std::string to_string(Checkpointing c) {
  switch (c) {
    case Checkpointing::None: return "none";
    case Checkpointing::Selective: return "selective";
    case Checkpointing::Full: return "full";
    case Checkpointing::OpSac: return "op_sac";
    case Checkpointing::EveryK: return "every_k";
  }
  return "none";
}

std::string to_string(Implementation i) {
  switch (i) {
    case Implementation::Hf: return "hf";
    case Implementation::Torchtitan: return "torchtitan";
    case Implementation::LlmFoundry: return "llm_foundry";
    case Implementation::Megatron: return "megatron";
    case Implementation::ModdedNanogpt: return "modded_nanogpt";
  }
  return "hf";
}

static_assert(static_cast<int>(Attention::SdpaCudnn) == static_cast<int>(AttentionKernel::SdpaCudnn) &&
                  static_cast<int>(Attention::Eager) == kAttentionKernelCount,
              "Attention lists AttentionKernel's values in its order, then Eager");

std::string to_string(Attention a) { return a == Attention::Eager ? "eager" : to_string(attention_kernel(a)); }

const std::vector<std::string>& attention_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (int i = 0; i < kAttentionCount; ++i) out.push_back(to_string(static_cast<Attention>(i)));
    return out;
  }();
  return names;
}

const std::vector<std::string>& training_loop_names() {
  static const std::vector<std::string> names{"hf_trainer", "hf_script", "composer", "torchtitan", "megatron", "modded_nanogpt"};
  return names;
}

std::string to_string(TrainingLoop l) { return training_loop_names()[static_cast<std::size_t>(l)]; }

TrainingLoop default_training_loop(Implementation i) {
  switch (i) {
    case Implementation::Hf: return TrainingLoop::HfScript;
    case Implementation::Torchtitan: return TrainingLoop::Torchtitan;
    case Implementation::LlmFoundry: return TrainingLoop::Composer;
    case Implementation::Megatron: return TrainingLoop::Megatron;
    case Implementation::ModdedNanogpt: return TrainingLoop::ModdedNanogpt;
  }
  return TrainingLoop::HfScript;
}

bool training_loop_keeps_output(TrainingLoop l) { return l == TrainingLoop::HfScript || l == TrainingLoop::Composer; }

WorkloadOptions default_options(const std::string& family) {
  WorkloadOptions o;
  if (family == "opt") {
    // HF OPTConfig (facebook/opt-*): dropout 0.1, attention_dropout 0.0; DeepSpeed-Chat 2023
    // trained it with HF's eager OPTAttention (the li-plus traces: aten::bmm + softmax).
    o.impl = Implementation::Hf;
    o.attention = Attention::Eager;
    o.dropout = 0.1;
  } else if (family == "gpt") {
    // HF GPT2Config: resid_pdrop = embd_pdrop = attn_pdrop = 0.1; eager GPT2Attention.
    o.impl = Implementation::Hf;
    o.attention = Attention::Eager;
    o.dropout = 0.1;
    o.attention_dropout = 0.1;
  } else if (family == "mpt") {
    // llm-foundry MPTConfig defaults: attn_pdrop = resid_pdrop = emb_pdrop = 0. Its benchmark
    // runs used attn_impl triton: scripts/train/benchmarking/submit_benchmarks.py sets
    // parameters['model']['attn_impl'] = args.attn_impl, default 'triton', and sweep.sh, which
    // lists every run of the tables, never passes --attn_impl.
    o.impl = Implementation::LlmFoundry;
    o.attention = Attention::FlashTriton;
  } else if (family == "nanogpt-2025") {
    // modded-nanogpt (2025-10): `torch.compile(model, dynamic=False, fullgraph=True)`,
    // FlashAttention-3's flash_attn_varlen_func (kernels-community varunneal/flash-attention-3),
    // the schedule's first windows (ws_long 3 blocks).
    o.impl = Implementation::ModdedNanogpt;
    o.attention = Attention::Flash3;
    o.compile = true;
    o.window_blocks = 3;
  } else if (family == "nanogpt") {
    // modded-nanogpt (2024-10): `model = torch.compile(model)`, F.scaled_dot_product_attention(
    // is_causal=True): sdpa's flash backend, cuDNN where the release defaults to it (2.5.0), which
    // a run states; no dropout.
    o.impl = Implementation::ModdedNanogpt;
    o.attention = Attention::SdpaFlash;
    o.compile = true;
  } else {
    // torchtitan Llama: F.scaled_dot_product_attention(is_causal=True) -> sdpa's flash backend on
    // sm80+; no dropout.
    o.impl = Implementation::Torchtitan;
    o.attention = Attention::SdpaFlash;
  }
  return o;
}

bool checkpoint_stops_early(const WorkloadOptions& o) {
  // Unset, every implementation's default is reentrant or early_stop=False (workload.hpp): the
  // llm_foundry runs that are non-reentrant say so through their yaml, and state it.
  return o.checkpoint_early_stop.value_or(false);
}

namespace {

// ---- op constructors -----------------------------------------------------------------------

Op gemm(std::string name, std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch, Dtype dt,
        Bytes saved = {}, GemmLayout layout = GemmLayout::Any) {
  Op o;
  o.name = std::move(name);
  o.cls = KernelClass::Gemm;
  o.work.gemms.push_back(GemmShape{m, n, k, batch, dt, layout});
  o.saved = saved;
  return o;
}

// `op` marked as writing a parameter's gradient (Op::param_grad).
Op param_grad(Op op) {
  op.param_grad = true;
  return op;
}

Op mem(std::string name, KernelClass cls, std::int64_t read, std::int64_t written, std::int64_t saved = 0,
       int kernels = 1) {
  Op o;
  o.name = std::move(name);
  o.cls = cls;
  o.kernels = kernels;
  o.read = Bytes{read};
  o.written = Bytes{written};
  o.work.memory_bytes = Bytes{read + written};
  // Its output, or for a reduction its input: the largest tensor of each of its kernels.
  o.work.tensor = Bytes{(written > 0 ? written : read) / std::max(1, kernels)};
  o.saved = Bytes{saved};
  return o;
}

// A kernel of TensorIterator's non-vectorized path (KernelClass::ElementwiseStrided) computing
// `elements` outputs (summed over its kernels): priced by its bytes and by its elements
// (ComputeProfile::strided_element_ns), whichever takes longer.
Op strided(std::string name, std::int64_t read, std::int64_t written, std::int64_t elements, std::int64_t saved = 0,
           int kernels = 1) {
  Op o = mem(std::move(name), KernelClass::ElementwiseStrided, read, written, saved, kernels);
  o.work.elements = elements;
  return o;
}

// The op as a further kernel of the previous op's aten call (Op::continues_previous).
Op continued(Op o) {
  o.continues_previous = true;
  return o;
}

// torch.compile (inductor): every maximal run of memory-bound ops between two GEMM/attention
// kernels becomes one generated kernel (KernelWork::generated: its reductions run at Inductor's
// rate where the profile has one). Assumed: the fused kernel reads what the run reads from
// outside (sum of reads minus the intermediates the run itself wrote, never less than the
// largest single read) and writes the run's last output plus every intermediate autograd saves.
// What autograd saves is AOTAutograd's min-cut partitioner's choice
// (torch/_functorch/partitioners.py min_cut_rematerialization_partition, inductor's default):
// pointwise ops are recomputed in the backward kernel rather than saved, so a run saves at most
// the tensors it reads from outside (SwiGLU's silu(gate) * up keeps gate and up, not silu(gate)
// as eager's SiluBackward and MulBackward do), and then writes no intermediate for backward.
std::vector<Op> fuse_memory_bound(const std::vector<Op>& ops) {
  std::vector<Op> out;
  std::size_t i = 0;
  while (i < ops.size()) {
    if (!is_memory_bound(ops[i].cls)) {
      out.push_back(ops[i++]);
      continue;
    }
    std::size_t j = i;
    std::int64_t read = 0, written = 0, max_read = 0, saved = 0;
    bool param_grads_only = true;
    std::string name;
    while (j < ops.size() && is_memory_bound(ops[j].cls)) {
      param_grads_only = param_grads_only && ops[j].param_grad;
      read += ops[j].read.count;
      written += ops[j].written.count;
      max_read = std::max(max_read, ops[j].read.count);
      saved += ops[j].saved.count;
      name += (name.empty() ? "" : "+") + ops[j].name;
      ++j;
    }
    const Op& last = ops[j - 1];
    std::int64_t fused_read = std::max(max_read, read - (written - last.written.count));
    std::int64_t fused_written = last.written.count + std::min(saved, written - last.written.count);
    if (saved > fused_read) {  // the partitioner keeps the run's inputs and recomputes the rest
      saved = fused_read;
      fused_written = last.written.count;
    }
    Op f = mem("fused(" + name + ")", ops[i].cls == last.cls ? last.cls : KernelClass::Elementwise, fused_read,
               fused_written, saved, 1);
    f.param_grad = param_grads_only;
    f.work.generated = true;
    out.push_back(f);
    i = j;
  }
  return out;
}

struct Dims {
  std::int64_t b = 0, s = 0, T = 0, h = 0, H = 0, d = 0, kvh = 0, kv = 0, I = 0, V = 0;
  std::int64_t e = 2;   // compute dtype bytes
  std::int64_t S2 = 0;  // b * heads * s * s: elements of one attention-score tensor
  Dtype dt = Dtype::BF16;
};

Dims dims_of(const ModelDims& md, std::int64_t b, std::int64_t s, Dtype dt) {
  Dims d;
  d.b = b;
  d.s = s;
  d.T = b * s;
  d.h = md.hidden;
  d.H = md.heads;
  d.d = md.hidden / md.heads;
  d.kvh = md.kv_heads;
  d.kv = md.kv_heads * d.d;
  d.I = md.ffn;
  d.V = md.vocab;
  d.e = dtype_bytes(dt);
  d.S2 = b * md.heads * s * s;
  d.dt = dt;
  return d;
}

// A linear layer y[T, out] = x[T, in] W^T (+ b): forward GEMM (m=T, n=out, k=in); backward input
// grad (m=T, n=in, k=out) and weight grad (m=in, n=out, k=T), PyTorch's AddmmBackward0 / MmBackward0;
// the bias grad is a separate sum over tokens (AddmmBackward0 > aten::sum). cuBLAS runs them as
// tn, nn and nt GEMMs (GemmLayout). `saved_input` is the bytes of x kept for the weight grad when
// this linear is the first consumer of x.
Module linear(const std::string& name, std::int64_t in, std::int64_t out, bool bias, const Dims& d,
              std::int64_t saved_input) {
  Module m;
  m.name = name;
  m.params.push_back(Param{name + ".weight", in * out, out});
  if (bias) m.params.push_back(Param{name + ".bias", out, out});
  m.forward.push_back(gemm("linear", d.T, out, in, 1, d.dt, Bytes{saved_input}, GemmLayout::TN));
  m.backward.push_back(gemm("linear.dgrad", d.T, in, out, 1, d.dt, {}, GemmLayout::NN));
  m.backward.push_back(param_grad(gemm("linear.wgrad", in, out, d.T, 1, d.dt, {}, GemmLayout::NT)));
  if (bias) m.backward.push_back(param_grad(mem("bias.grad_sum", KernelClass::Reduction, d.T * out * d.e, out * d.e)));
  return m;
}

enum class NormKind { LayerNorm, ApexLayerNorm, RmsNormFp32 };

// A norm over `hidden`. LayerNorm (aten::native_layer_norm; llm-foundry's low-precision
// LayerNorm is the same kernel in bf16): one forward kernel saving the input and fp32
// mean/rstd; backward two kernels (grad input, gamma/beta), apex's three. RMSNorm as HF
// LlamaRMSNorm and torchtitan's RMSNorm write it: x.float(), pow(2).mean(-1), + eps, rsqrt, x *
// rstd, .type_as(x), * weight: 8 kernels through fp32 (read 20, write 16 bytes per element);
// saved: the fp32 input (4 B) and the bf16 normalised output (2 B) per element. Backward ~12
// kernels over the same fp32 tensors. Compiled: one kernel forward, two backward.
Module norm(const std::string& name, NormKind kind, bool bias, const Dims& d, bool compile) {
  Module m;
  m.name = name;
  m.params.push_back(Param{name + ".weight", d.h, d.h});
  if (bias) m.params.push_back(Param{name + ".bias", d.h, d.h});
  const std::int64_t n = d.T * d.h, e = d.e;
  if (kind == NormKind::RmsNormFp32 && !compile) {
    // Composite eager ops: TensorIterator's vectorized elementwise kernels (and one mean), not a
    // fused norm kernel: priced as elementwise.
    m.forward.push_back(mem("rmsnorm", KernelClass::Elementwise, n * 20, n * 16, n * (4 + e) + d.T * 4, 8));
    m.backward.push_back(mem("rmsnorm.bwd", KernelClass::Elementwise, n * 40, n * 28, 0, 12));
    return m;
  }
  m.forward.push_back(mem(kind == NormKind::RmsNormFp32 ? "rmsnorm" : "layer_norm", KernelClass::Norm, n * e, n * e,
                          n * e + d.T * 8));
  m.backward.push_back(mem("norm.bwd", KernelClass::Norm, 4 * n * e, n * e + 2 * d.h * 4, 0,
                           kind == NormKind::ApexLayerNorm ? 3 : 2));
  return m;
}

// Residual dropout (aten::native_dropout: one fused_dropout kernel writing the output and a bool
// mask, which autograd saves; backward: masked_scale) when p > 0.
void dropout(std::vector<Op>& fwd, std::vector<Op>& bwd_front, std::int64_t n, std::int64_t e, double p) {
  if (p <= 0) return;
  fwd.push_back(mem("dropout", KernelClass::Elementwise, n * e, n * e + n, n));
  bwd_front.insert(bwd_front.begin(), mem("dropout.bwd", KernelClass::Elementwise, n * e + n, n * e));
}

// embedding_dense_backward_cuda (aten/src/ATen/native/cuda/Embedding.cu) for `rows` x h weights:
// `at::arange(num_indices)` (an int64 index_t kernel: strided class in analyze, writes T x 8 B),
// cub radix_sort_pairs of the int64 ids with the full key width (nbits is commented out there:
// histogram, exclusive sum and 8 one-sweep passes), then embedding_backward_cuda_kernel
// (EmbeddingBackwardKernel.cu): `at::zeros` of the rows x h gradient (one fill kernel), the
// segment kernels (compact init, unique-by-key, partials per segment, scan init, scan,
// num of partial segments, partial segment offset) and compute_grad_weight + sum_and_scatter.
// 1 + 10 + 1 + 7 + 2 = 21 kernels, as each of the two embedding backwards in the li-plus trace.
std::vector<Op> embedding_backward(const Dims& d, std::int64_t rows) {
  const std::int64_t T = d.T, n = d.T * d.h;
  return {strided("embedding.bwd.arange", 0, T * 8, T),
          param_grad(mem("embedding.bwd.zero_grad", KernelClass::Elementwise, 0, rows * d.h * d.e)),
          param_grad(mem("embedding.bwd", KernelClass::Embedding, n * d.e + T * 8 * 6, n * 4, 0, 19))};
}

Op residual_add(const Dims& d) {
  return mem("residual_add", KernelClass::Elementwise, 2 * d.T * d.h * d.e, d.T * d.h * d.e);
}
// Where two gradient paths meet (the residual stream, a shared input of q/k/v), autograd adds.
Op grad_add(const Dims& d, std::int64_t n) {
  return mem("grad_accumulate", KernelClass::Elementwise, 2 * n * d.e, n * d.e);
}

// The attention core. Flash / sdpa: one kernel saving q, k, v, out and the fp32 log-sum-exp
// (FlashAttention-2 paper, Algorithm 1-2); causal FLOPs 2 b s^2 h forward (QK^T and PV halved)
// and 5 b s^2 h backward; FA2's backward launches three kernels (dot(dO, O), the main loop,
// dq conversion: flash_bwd_* in the li-plus Megatron trace), the triton kernel two, the
// memory-efficient kernel one. Each runs at its kernel's rate for the sequence length, over the
// FLOPs of the head width it is compiled for (attention_kernel_head_dim: a head of 112 runs 128).
// q, k, v given in elements per token: sdpa sees the repeated k/v of GQA (torchtitan repeat_kv).
// `flash_attn`: the flash_attn package's release, whose kernel widths `flash` runs (WorkloadOptions).
Module fused_attention(const std::string& name, const Dims& d, Attention a, std::int64_t kv_tokens_elems, int bwd_kernels,
                       Release flash_attn) {
  Module m;
  m.name = name;
  const std::int64_t q = d.T * d.h, kv = d.T * kv_tokens_elems, e = d.e;
  const std::int64_t lse = d.b * d.H * d.s * 4;
  Op f = mem("attention", KernelClass::Attention, (q + 2 * kv) * e, q * e + lse, (q + 2 * kv + q) * e + lse);
  Op b = mem("attention.bwd", KernelClass::Attention, (2 * q + 2 * kv) * e + q * e + lse, (q + 2 * kv) * e + q * 4, 0,
             a == Attention::SdpaEfficient ? 1 : bwd_kernels);
  const AttentionKernel k = attention_kernel(a);
  f.work.attention = AttentionWork{fused_attention_flops(d.b, d.s, d.h, false, true), k, false, d.s, d.d, flash_attn};
  b.work.attention = AttentionWork{fused_attention_flops(d.b, d.s, d.h, true, true), k, true, d.s, d.d, flash_attn};
  m.forward.push_back(f);
  m.backward.push_back(b);
  return m;
}

// What an HF eager attention does between q/k/v and the output projection.
struct EagerStyle {
  bool opt = false;          // OPT: q pre-scaled in q_proj, clamp via torch.max(w, finfo.min)
  bool gpt2 = false;         // GPT-2: scale by division, causal torch.where
  bool fp32_softmax = false; // Llama: softmax(dtype=float32).to(bf16)
  double attn_dropout = 0;
};

// HF eager attention (modeling_opt.py OPTAttention.forward, modeling_gpt2.py GPT2Attention._attn,
// modeling_llama.py LlamaAttention.forward of transformers 4.3x): full b*H*s*s score tensors.
// OPT's op list is the one in the li-plus trace: q copy, bmm, mask add, max, softmax, bmm,
// reshape copy (+ k/v copies in their projections); backward: reshape copy, 2 bmm, softmax
// backward (2 kernels), max backward (div, eq, where, lt, masked_fill), 2 bmm, 2 copies.
std::vector<Op> eager_attention_forward(const Dims& d, const EagerStyle& st) {
  const std::int64_t n = d.T * d.h, e = d.e, S2 = d.S2, bH = d.b * d.H;
  std::vector<Op> f;
  f.push_back(strided("q.contiguous", n * e, n * e, n, n * e));
  f.push_back(gemm("bmm.qk", d.s, d.s, d.d, bH, d.dt));
  if (st.gpt2) {
    f.push_back(strided("scores.div_scale", S2 * e, S2 * e, S2));
    f.push_back(strided("scores.causal_where", S2 * e, S2 * e, S2));
  } else if (!st.opt) {
    f.push_back(mem("scores.div_scale", KernelClass::Elementwise, S2 * e, S2 * e));
  }
  // Mask add: the [b, 1, s, s] mask broadcast over heads -> TensorIterator's strided path. OPT's
  // torch.max(scores, min) saves its input (MaximumBackward0 keeps self).
  f.push_back(strided("scores.mask_add", S2 * e, S2 * e, S2, st.opt ? S2 * e : 0));
  if (st.opt) {
    // modeling_opt.py: torch.max(attn_weights, torch.tensor(torch.finfo(attn_weights.dtype).min,
    // device=attn_weights.device)): the scalar is copied from pageable host memory, so the host
    // synchronizes the stream before the max (one cudaStreamSynchronize per block in the
    // li-plus traces' forward). That tensor is float32 (the default dtype): against 16-bit scores
    // every element goes through a dtype cast.
    Op clamp = strided("scores.max_clamp", S2 * e, S2 * e, S2);
    if (e != 4) clamp.work.cast_elements = S2;
    clamp.host_sync_before = true;
    f.push_back(clamp);
  }
  if (st.fp32_softmax) {
    f.push_back(mem("softmax.fp32", KernelClass::Reduction, S2 * e, S2 * 4, S2 * 4));
    f.push_back(mem("probs.to_bf16", KernelClass::Elementwise, S2 * 4, S2 * e, st.attn_dropout > 0 ? 0 : S2 * e));
  } else {
    f.push_back(mem("softmax", KernelClass::Reduction, S2 * e, S2 * e, S2 * e));
  }
  if (st.attn_dropout > 0)
    f.push_back(mem("probs.dropout", KernelClass::Elementwise, S2 * e, S2 * e + S2, S2 + S2 * e));
  f.push_back(gemm("bmm.pv", d.s, d.d, d.s, bH, d.dt));
  f.push_back(strided("out.transpose_contiguous", n * e, n * e, n));
  return f;
}

// The backward of eager_attention_forward, in autograd's order.
std::vector<Op> eager_attention_backward(const Dims& d, const EagerStyle& st) {
  const std::int64_t n = d.T * d.h, e = d.e, S2 = d.S2, bH = d.b * d.H;
  std::vector<Op> b;
  b.push_back(strided("out.grad_copy", n * e, n * e, n));
  b.push_back(gemm("bmm.pv.dprobs", d.s, d.s, d.d, bH, d.dt));
  b.push_back(gemm("bmm.pv.dv", d.s, d.d, d.s, bH, d.dt));
  if (st.attn_dropout > 0) b.push_back(mem("probs.dropout.bwd", KernelClass::Elementwise, S2 * e + S2, S2 * e));
  if (st.fp32_softmax) {
    b.push_back(mem("probs.to_fp32", KernelClass::Elementwise, S2 * e, S2 * 4));
    b.push_back(mem("softmax.fp32.bwd", KernelClass::Reduction, 4 * S2 * 4, 2 * S2 * 4 + S2 * e, 0, 2));
  } else {
    // _softmax_backward_data in bf16: a vectorized elementwise pass (grad * probs) and the
    // warp-softmax backward reduction (two kernels in the li-plus trace).
    b.push_back(mem("softmax.bwd.mul", KernelClass::Elementwise, 2 * S2 * e, S2 * e));
    b.push_back(mem("softmax.bwd", KernelClass::Reduction, 2 * S2 * e, S2 * e));
  }
  if (st.opt) {
    // MaximumBackward0: masks from eq / lt against the broadcast scalar (strided, bool out), then
    // div, where, masked_fill on the contiguous scores.
    // Against the float32 scalar tensor too: cast per element when the scores are 16-bit.
    Op compare = strided("max_clamp.bwd.compare", 2 * S2 * e, 2 * S2, 2 * S2, 0, 2);
    if (e != 4) compare.work.cast_elements = 2 * S2;
    b.push_back(compare);
    b.push_back(mem("max_clamp.bwd.select", KernelClass::Elementwise, 4 * S2 * e + 2 * S2, 3 * S2 * e, 0, 3));
  }
  if (st.gpt2) {
    b.push_back(strided("causal_where.bwd", S2 * e, S2 * e, S2));
    b.push_back(strided("div_scale.bwd", S2 * e, S2 * e, S2));
  } else if (!st.opt) {
    b.push_back(mem("div_scale.bwd", KernelClass::Elementwise, S2 * e, S2 * e));
  }
  b.push_back(gemm("bmm.qk.dq", d.s, d.d, d.s, bH, d.dt));
  b.push_back(gemm("bmm.qk.dk", d.s, d.d, d.s, bH, d.dt));
  b.push_back(strided("dq.view_copy", n * e, n * e, n));
  b.push_back(strided("dk.view_copy", n * e, n * e, n));
  return b;
}

// HF eager attention: the forward and backward above as one module.
Module eager_attention(const std::string& name, const Dims& d, const EagerStyle& st) {
  Module m;
  m.name = name;
  m.forward = eager_attention_forward(d, st);
  m.backward = eager_attention_backward(d, st);
  return m;
}

// Rotary embedding on q and k. HF (apply_rotary_pos_emb): q*cos + rotate_half(q)*sin with
// rotate_half = cat(-x2, x1): neg, cat, mul, mul, add = 5 kernels per tensor. torchtitan
// (apply_rotary_emb): x.float() viewed complex, * freqs_cis, view_as_real, type_as: 3 kernels
// per tensor through fp32. Backward mirrors them.
void rotary(std::vector<Op>& f, std::vector<Op>& b, const Dims& d, bool titan, bool compile) {
  const std::int64_t n = d.T * (d.h + d.kv), e = d.e;
  if (compile) {
    f.push_back(mem("rotary", KernelClass::Elementwise, n * e, n * e, 0, 1));
    b.push_back(mem("rotary.bwd", KernelClass::Elementwise, n * e, n * e, 0, 1));
  } else if (titan) {
    f.push_back(mem("rotary", KernelClass::Elementwise, n * (e + 4 + 4 + 4), n * (4 + 4 + e), 0, 6));
    b.push_back(mem("rotary.bwd", KernelClass::Elementwise, n * (e + 4 + 4 + 4), n * (4 + 4 + e), 0, 6));
  } else {
    f.push_back(mem("rotary", KernelClass::Elementwise, n * e * 7, n * e * 5, n * e, 10));
    b.push_back(mem("rotary.bwd", KernelClass::Elementwise, n * e * 7, n * e * 5, 0, 10));
  }
}

// The MLP activation. ReLU (OPT): clamp_min, saves its output (also fc2's input, counted once);
// GELU (erf, MPT / Megatron fused with the bias): one kernel, saves its input; HF gelu_new
// (GPT-2): 0.5 x (1 + tanh(...)) in 8 eager kernels saving its intermediates; SwiGLU (Llama):
// silu(w1 x) * w3 x: silu and mul, saving w1 x, silu out, w3 x (the mul output is w2's input).
enum class Act { Relu, Gelu, GeluNew, SwiGlu };

struct BlockBuild {
  const ModelDims& md;
  Dims d;
  WorkloadOptions o;
};

// One transformer block as its implementation launches it: the attention half (norm, q/k/v
// projections, the attention kernel, the output projection with its residual add) and the MLP
// half, each as the family and implementation write it.
class BlockBuilder {
 public:
  BlockBuilder(int index, const BlockBuild& bb)
      : d(bb.d), o(bb.o), fam(bb.md.family), n(d.T * d.h), e(d.e), In(d.T * d.I), p(fmt::format("block.{}", index)),
        llama(fam == "llama"), hf(o.impl == Implementation::Hf), titan(o.impl == Implementation::Torchtitan),
        foundry(o.impl == Implementation::LlmFoundry), megatron(o.impl == Implementation::Megatron), bias(!llama),
        nk(llama ? NormKind::RmsNormFp32 : megatron ? NormKind::ApexLayerNorm : NormKind::LayerNorm),
        act(llama ? Act::SwiGlu : fam == "opt" ? Act::Relu : (hf && fam == "gpt") ? Act::GeluNew : Act::Gelu),
        eager(o.attention == Attention::Eager) {
    l.name = p;
    l.kind = LayerKind::Block;
  }

  Layer build() {
    attention_projections();
    attention_kernel();
    output_projection();
    mlp();
    // The first norm's backward ends the block: its gradient meets the residual stream's.
    l.modules.front().backward.push_back(grad_add(d, n));
    if (o.compile)
      for (auto& m : l.modules) {
        m.forward = fuse_memory_bound(m.forward.vector());
        m.backward = fuse_memory_bound(m.backward.vector());
      }
    return std::move(l);
  }

 private:
  // The norm before attention and the q/k/v projections (fused or separate), with the copies
  // and scalings the family's attention code makes of their outputs.
  void attention_projections() {
    l.modules.push_back(norm(p + ".attn_norm", nk, bias, d, o.compile));
    if (foundry || megatron || (hf && fam == "gpt")) {
      // Fused qkv projection (MPT Wqkv, Megatron query_key_value, GPT-2 c_attn); q/k/v are views.
      Module qkv = linear(p + ".attn.qkv_proj", d.h, d.h + 2 * d.kv, bias, d, n * e);
      if (eager) {
        // GPT-2 eager: matmul of the permuted k and v views copies them (torch.matmul -> bmm needs
        // a contiguous batch stride); saved for the bmm backward.
        qkv.forward.push_back(strided("k.contiguous", d.T * d.kv * e, d.T * d.kv * e, d.T * d.kv, d.T * d.kv * e));
        qkv.forward.push_back(strided("v.contiguous", d.T * d.kv * e, d.T * d.kv * e, d.T * d.kv, d.T * d.kv * e));
        qkv.backward.insert(qkv.backward.begin(), mem("dqkv.cat", KernelClass::Copy, 3 * n * e, 3 * n * e));
      }
      // (MPT saves q, k, v for the triton kernel as views of the Wqkv output: counted there.)
      l.modules.push_back(std::move(qkv));
    } else {
      Module q = linear(p + ".attn.q_proj", d.h, d.h, bias, d, n * e);
      Module k = linear(p + ".attn.k_proj", d.h, d.kv, bias, d, 0);
      Module v = linear(p + ".attn.v_proj", d.h, d.kv, bias, d, 0);
      if (fam == "opt" && eager) {
        // OPTAttention: q_proj(x) * scaling; k/v: _shape(...).contiguous() (saved by the bmms).
        q.forward.push_back(mem("q.scale", KernelClass::Elementwise, n * e, n * e));
        q.backward.insert(q.backward.begin(), mem("q.scale.bwd", KernelClass::Elementwise, n * e, n * e));
        k.forward.push_back(strided("k.contiguous", d.T * d.kv * e, d.T * d.kv * e, d.T * d.kv, d.T * d.kv * e));
        v.forward.push_back(strided("v.contiguous", d.T * d.kv * e, d.T * d.kv * e, d.T * d.kv, d.T * d.kv * e));
        k.backward.insert(k.backward.begin(), strided("dk.reshape", d.T * d.kv * e, d.T * d.kv * e, d.T * d.kv));
      }
      // The three projections share their input: its gradient is summed (2 adds).
      k.backward.push_back(grad_add(d, n));
      q.backward.push_back(grad_add(d, n));
      l.modules.push_back(std::move(q));
      l.modules.push_back(std::move(k));
      l.modules.push_back(std::move(v));
      if (llama) {
        Module rot;
        rot.name = p + ".attn.rotary";
        rotary(rot.forward.mut(), rot.backward.mut(), d, titan, o.compile);
        l.modules.push_back(std::move(rot));
      }
    }
  }

  // The attention itself: eager (bmm, softmax, bmm) or a fused kernel, with the repeat_kv and
  // transpose copies around it.
  void attention_kernel() {
    if (eager) {
      EagerStyle st;
      st.opt = fam == "opt";
      st.gpt2 = fam == "gpt";
      st.fp32_softmax = llama;
      st.attn_dropout = o.attention_dropout;
      Module core = eager_attention(p + ".attn.core", d, st);
      if (d.kvh != d.H) {
        // repeat_kv: expand + reshape copies k and v to all heads before the bmm.
        core.forward.insert(core.forward.begin(), strided("repeat_kv", 2 * d.T * d.kv * e, 2 * n * e, 2 * n,
                                                      2 * n * e, 2));
        core.backward.push_back(mem("repeat_kv.bwd_sum", KernelClass::Reduction, 2 * n * e, 2 * d.T * d.kv * e, 0, 2));
      } else if (llama || st.gpt2) {
        // q (and for llama k, v) made contiguous for bmm from the transposed [b, H, s, d] views.
        if (llama) {
          core.forward.insert(core.forward.begin() + 1, strided("k.contiguous", n * e, n * e, n, n * e));
          core.forward.insert(core.forward.begin() + 2, strided("v.contiguous", n * e, n * e, n, n * e));
        }
      }
      l.modules.push_back(std::move(core));
    } else {
      Module core;
      std::int64_t kv_seen = d.kv;  // per token, as the attention kernel sees k and v
      std::vector<Op> pre, post;
      if (d.kvh != d.H && titan) {
        // torchtitan repeat_kv: expand + reshape copies k and v to every head; sdpa saves the copies.
        pre.push_back(strided("repeat_kv", 2 * d.T * d.kv * e, 2 * n * e, 2 * n, 0, 2));
        post.push_back(mem("repeat_kv.bwd_sum", KernelClass::Reduction, 2 * n * e, 2 * d.T * d.kv * e, 0, 2));
        kv_seen = d.h;
      }
      core = fused_attention(p + ".attn.core", d, o.attention, kv_seen, foundry ? 2 : 3, o.flash_attn());
      core.forward.insert(core.forward.begin(), pre.begin(), pre.end());
      for (const auto& op : post) core.backward.push_back(op);
      if (titan || hf) {
        // output.transpose(1, 2).contiguous() before the output projection, and its gradient.
        core.forward.push_back(strided("out.transpose_contiguous", n * e, n * e, n));
        core.backward.insert(core.backward.begin(), strided("out.grad_copy", n * e, n * e, n));
      }
      l.modules.push_back(std::move(core));
    }
  }

  // The output projection, dropout and the residual add.
  void output_projection() {
    // llm-foundry's flash attention returns `attn_output.view(*attn_output.shape[:2], -1)`
    // (attention.py flash_attn_fn): out_proj's saved input is the attention kernel's saved output,
    // one storage, counted once (with the kernel). Elsewhere a transpose copy or eager bmm output
    // comes between them.
    const bool shares_attention_output = foundry && o.attention != Attention::Eager;
    Module out = linear(p + ".attn.o_proj", d.h, d.h, bias, d, shares_attention_output ? 0 : n * e);
    if (megatron) {
      // Megatron: skip_bias_add + fused bias-dropout-add (one nvfuser kernel; saves the mask).
      out.forward.push_back(mem("bias_dropout_add", KernelClass::Elementwise, 2 * n * e, n * e + n, n));
      out.backward.insert(out.backward.begin(), mem("bias_dropout_add.bwd", KernelClass::Elementwise, n * e + n, n * e));
    } else {
      std::vector<Op> bfront;
      dropout(out.forward.mut(), bfront, n, e, o.dropout);
      out.forward.push_back(residual_add(d));
      out.backward.insert(out.backward.begin(), bfront.begin(), bfront.end());
    }
    l.modules.push_back(std::move(out));
  }

  // The norm before the MLP and the MLP: SwiGLU (gate, up, down) or fc1, activation, fc2.
  void mlp() {
    Module ln2 = norm(p + ".mlp_norm", nk, bias, d, o.compile);
    ln2.backward.push_back(grad_add(d, n));  // the residual stream's gradient meets the MLP's
    l.modules.push_back(std::move(ln2));
    if (act == Act::SwiGlu) swiglu_mlp();
    else fc_mlp();
  }

  // Llama's MLP: down(silu(gate(x)) * up(x)) and the residual add.
  void swiglu_mlp() {
    Module w1 = linear(p + ".mlp.gate_proj", d.h, d.I, false, d, n * e);
    Module w3 = linear(p + ".mlp.up_proj", d.h, d.I, false, d, 0);
    const Op silu = mem("silu", KernelClass::Elementwise, In * e, In * e, In * e);        // saves w1 x
    const Op mul = mem("mul", KernelClass::Elementwise, 2 * In * e, In * e, 2 * In * e);  // saves silu out, w3 x
    const Op mul_bwd = mem("mul.bwd", KernelClass::Elementwise, 3 * In * e, 2 * In * e, 0, 2);
    const Op silu_bwd = mem("silu.bwd", KernelClass::Elementwise, 2 * In * e, In * e);
    if (o.compile) {
      // Inductor's order: both GEMMs, then silu and mul as one generated kernel (fused per module).
      w3.backward.push_back(grad_add(d, n));
      l.modules.push_back(std::move(w1));
      l.modules.push_back(std::move(w3));
      l.modules.push_back(Module{p + ".mlp.act", {}, {silu, mul}, {mul_bwd, silu_bwd}});
    } else {
      // Eager, as Python evaluates `w2(F.silu(w1(x)) * w3(x))` (torchtitan FeedForward.forward; HF
      // LlamaMLP `down_proj(act_fn(gate_proj(x)) * up_proj(x))`): w1, silu, w3, mul. The autograd
      // engine runs the ready node created last first (sequence_nr), so after MulBackward0 come
      // w3's MmBackward0, SiluBackward0, then w1's, whose input gradient meets w3's in x's buffer.
      w1.backward.push_back(grad_add(d, n));
      l.modules.push_back(std::move(w1));
      l.modules.push_back(Module{p + ".mlp.act_fn", {}, {silu}, {silu_bwd}});
      l.modules.push_back(std::move(w3));
      l.modules.push_back(Module{p + ".mlp.act", {}, {mul}, {mul_bwd}});
    }
    Module down = linear(p + ".mlp.down_proj", d.I, d.h, false, d, In * e);  // saves the mul output
    // h + mlp(norm(h)): HF LlamaDecoderLayer.forward `hidden_states = residual + hidden_states`,
    // torchtitan models/llama/model.py TransformerBlock.forward `out = h + self.feed_forward(self.ffn_norm(h))`.
    down.forward.push_back(residual_add(d));
    l.modules.push_back(std::move(down));
  }

  // fc2(act(fc1(x))) with the family's activation, dropout and the residual add.
  void fc_mlp() {
    Module fc1 = linear(p + ".mlp.fc1", d.h, d.I, true, d, n * e);
    switch (act) {
      case Act::Relu:
        fc1.forward.push_back(mem("relu", KernelClass::Elementwise, In * e, In * e, In * e));
        fc1.backward.insert(fc1.backward.begin(), mem("relu.bwd", KernelClass::Elementwise, 2 * In * e, In * e));
        break;
      case Act::GeluNew:
        fc1.forward.push_back(mem("gelu_new", KernelClass::Elementwise, 10 * In * e, 8 * In * e, 3 * In * e, 8));
        fc1.backward.insert(fc1.backward.begin(), mem("gelu_new.bwd", KernelClass::Elementwise, 14 * In * e, 10 * In * e, 0, 10));
        break;
      default:
        // GELU (erf): one kernel; Megatron fuses the bias into it (bias_gelu) and saves the input.
        fc1.forward.push_back(mem(megatron ? "bias_gelu" : "gelu", KernelClass::Elementwise, In * e, In * e, In * e));
        fc1.backward.insert(fc1.backward.begin(), mem("gelu.bwd", KernelClass::Elementwise, 2 * In * e, In * e));
        break;
    }
    l.modules.push_back(std::move(fc1));
    // fc2's input is the activation's output: saved by fc2 except for ReLU (whose saved output is the same tensor).
    Module fc2 = linear(p + ".mlp.fc2", d.I, d.h, true, d, act == Act::Relu ? 0 : In * e);
    if (megatron) {
      fc2.forward.push_back(mem("bias_dropout_add", KernelClass::Elementwise, 2 * n * e, n * e + n, n));
      fc2.backward.insert(fc2.backward.begin(), mem("bias_dropout_add.bwd", KernelClass::Elementwise, n * e + n, n * e));
    } else {
      std::vector<Op> bfront;
      dropout(fc2.forward.mut(), bfront, n, e, o.dropout);
      fc2.forward.push_back(residual_add(d));
      fc2.backward.insert(fc2.backward.begin(), bfront.begin(), bfront.end());
    }
    l.modules.push_back(std::move(fc2));
  }

  const Dims& d;
  const WorkloadOptions& o;
  const std::string& fam;           // model family ("llama", "opt", "gpt", "mpt", ...)
  const std::int64_t n, e, In;      // elements of one activation [T, h], bytes per element, elements of [T, I]
  const std::string p;              // the block's name prefix, "block.N"
  const bool llama, hf, titan, foundry, megatron;  // family / implementation
  const bool bias;                  // linear layers have biases (all but Llama)
  const NormKind nk;
  const Act act;
  const bool eager;                 // eager attention (bmm + softmax) instead of a fused kernel
  Layer l;
};

Layer block(int index, const BlockBuild& bb) { return BlockBuilder(index, bb).build(); }

// The autograd nodes of one block's forward besides its parameters' AccumulateGrad, read from
// the code each implementation runs (every node counts: the engine's compute_dependencies walks
// the whole graph before the first node runs, kernels or not):
//  HF OPT eager (modeling_opt.py, transformers 4.3x), 52: per q/k/v/out_proj on the 3-d hidden
//    states T, View x2, Addmm; fc1/fc2 on the 2-d reshape T, Addmm; q * scaling (Mul); _shape
//    of q, k, v (View, Transpose, Clone each); view(*proj_shape) x3; k.transpose; 2 Bmm; the
//    scores' views around the mask Add and Maximum; Softmax; the output's View, Transpose and
//    reshape (Clone, UnsafeView); 2 NativeLayerNorm, Relu, the decoder layer's reshape and view
//    and 2 residual Adds. The li-plus ZeRO traces' backward evaluates exactly these per block
//    (19 View, 6 T, 6 Addmm, 5 Transpose, 4 Clone, 3 Add, 2 NativeLayerNorm, 2 Bmm, Mul,
//    UnsafeView, Relu, Softmax, Maximum) plus the 2 NativeDropout of p = 0.1 (dropout sites).
//  HF GPT-2 eager (modeling_gpt2.py), 52: Conv1D c_attn/c_proj/c_fc/c_proj (View, Addmm, View
//    each), split, _split_heads (View, Permute) x3, k.transpose, two 4-d matmuls (Expand x2,
//    View x2, Bmm, View each), the scale Div, causal Where, mask Add, Softmax, _merge_heads
//    (Permute, Clone, View), 2 LayerNorm, NewGELU's 9 pointwise nodes, 2 residual Adds.
//  Llama (HF LlamaDecoderLayer and torchtitan TransformerBlock alike), 72: 2 RMSNorm of 8 nodes
//    (x.float(), pow, mean, + eps, rsqrt, mul, type_as, * weight); 7 bias-free linears on 3-d
//    input (T, View, Mm, UnsafeView: at::matmul's fold); the q/k/v views (3); rotary (14: per q
//    and k a float cast, reshape, view_as_complex, complex mul, view_as_real, flatten and the
//    type_as back); 3 transposes; the sdpa node; the output's transpose, contiguous and view;
//    SiLU and the gate Mul; 2 residual Adds. GQA's repeat_kv adds an unsqueeze, expand and
//    reshape (clone + view) per k and v: 8.
//  llm-foundry MPT (attention.py flash_attn_fn / triton_flash_attn_fn, blocks.py MPTBlock), 27:
//    2 LayerNorm; Wqkv, out_proj, up_proj, down_proj on 3-d input (4 each); qkv.chunk (Split);
//    the rearranges of q, k, v (View x3); the kernel's Function node; the output view; GELU;
//    2 residual Adds (resid_pdrop 0: F.dropout returns its input, no node).
//  Megatron GPT, 30: the li-plus Megatron trace's per-layer nodes less the two tensor-parallel
//    communication nodes (6 View, 4 Clone, 4 Permute, 4 jit-fused DifferentiableGraph, 4 linear
//    Functions, 2 Expand, 2 FusedLayerNorm, GeLU, ReshapeAlias, FlashAttnVarlen, SplitWithSizes).
//  Compiled (torch.compile per block, torchtitan's way): one CompiledFunctionBackward.
// A residual or attention dropout of p > 0 adds a NativeDropout node each (HF; Megatron's is in
// its fused nodes). Checkpointing does not change the count: non-reentrant checkpointing keeps
// the graph and replaces only the saved tensors (torch/utils/checkpoint.py).
std::int64_t block_autograd_nodes(const ModelDims& md, const Dims& d, const WorkloadOptions& o) {
  if (o.compile) return 1;
  const bool gqa = d.kvh != d.H;
  const std::int64_t dropouts = (o.dropout > 0 ? 2 : 0) + (o.attention_dropout > 0 ? 1 : 0);
  switch (o.impl) {
    case Implementation::Megatron: return 30;
    case Implementation::LlmFoundry: return 27 + dropouts;
    case Implementation::Torchtitan: return 72 + (gqa ? 8 : 0) + dropouts;
    case Implementation::ModdedNanogpt: return 1;  // always compiled (namespace nanogpt below)
    case Implementation::Hf: break;
  }
  if (md.family == "llama") return 72 + (gqa ? 8 : 0) + dropouts;
  return 52 + dropouts;
}

// The head's nodes besides AccumulateGrad: lm_head on the 3-d hidden states (T, View, Mm,
// UnsafeView) and the loss: HF's shifted CrossEntropyLoss (2 Slice, the contiguous Clone, View,
// LogSoftmax, NllLoss: the li-plus traces' 10 head nodes with lm_head), the fp32 loss of
// torchtitan / HF Llama / Megatron (flatten View, float ToCopy, LogSoftmax, NllLoss), or
// flash_attn's fused cross entropy (View, its Function).
std::int64_t head_autograd_nodes(bool shifted, const WorkloadOptions& o) {
  if (shifted) return 4 + 6;
  return 4 + (o.impl == Implementation::LlmFoundry ? 2 : 4);
}

std::int64_t saved_of(const std::vector<Op>& ops) {
  std::int64_t s = 0;
  for (const auto& o : ops) s += o.saved.count;
  return s;
}

std::int64_t saved_of(const Layer& l) {
  std::int64_t s = 0;
  for (const auto& m : l.modules) s += saved_of(m.forward.vector());
  return s;
}

// A layer that keeps every op's saved tensors (no checkpointing) holds them as the tensors
// autograd really keeps: each op's saved bytes are an allocation of their own, made as the op
// runs and freed once its module's backward has run (SavedActivations). One block per layer
// would hand the caching allocator a request no real step makes, and its free segments would
// serve the next step differently (the li-plus ZeRO traces allocate 128, 64 and 16 MiB tensors
// per block, never the block's sum). A checkpointed layer keeps its policy's block.
// A list a block shares with the others (OpList) is changed, and so copied, only where an op is not
// marked yet: add_blocks marks the blocks' lists before they are shared.
void saved_tensors_per_op(Layer& l) {
  if (!l.recompute.empty() || l.saved_activations.count != saved_of(l)) return;
  for (auto& m : l.modules) {
    const OpList& ops = m.forward;
    for (std::size_t i = 0; i < ops.size(); ++i)
      if (ops[i].saved.count > 0 && !ops[i].own_saved_tensor) m.forward[i].own_saved_tensor = true;
  }
}

// Whether autograd packs a tensor when this forward op runs (what a saved-tensor hook sees):
// every GEMM saves its inputs (the weight at least), the fused attention kernels their outputs,
// a memory-bound op what it saves.
bool packs_saved_tensor(const Op& o) {
  return o.cls == KernelClass::Gemm || o.cls == KernelClass::Attention || o.saved.count > 0;
}

// How many of a checkpointed region's forward ops (in launch order) its recompute runs when it
// stops early (checkpoint_stops_early), or under torch.compile, whose partitioner
// (min_cut_rematerialization_partition) puts in the backward graph only what a gradient reads:
// up to the last op that saves a tensor. Autograd packs an op's inputs before its kernel runs
// (tools/autograd/gen_variable_type.py emits the saves into SETUP_DERIVATIVE, ahead of the
// call), so when that op is a GEMM (the block's MLP down projection) the recompute ends before
// its kernel; an op that saves its output (dropout's mask, the attention kernel's output) runs,
// with the further kernels of its call. Nothing after it runs (the residual add). Every op
// otherwise (`stops_early` false: the reentrant variant re-runs the whole forward).
std::size_t recompute_end(const std::vector<const Op*>& region, bool stops_early) {
  if (!stops_early) return region.size();
  std::size_t last = region.size();
  for (std::size_t i = 0; i < region.size(); ++i)
    if (packs_saved_tensor(*region[i])) last = i;
  if (last == region.size()) return 0;  // nothing saved: backward never unpacks, nothing is recomputed
  if (region[last]->cls == KernelClass::Gemm) return last;
  std::size_t end = last + 1;
  while (end < region.size() && region[end]->continues_previous) ++end;
  return end;
}

// The forward ops of a layer's modules (all, or those whose name ends with `suffix`), in order.
std::vector<const Op*> forward_ops(const Layer& l, std::string_view suffix = {}) {
  std::vector<const Op*> out;
  for (const auto& m : l.modules)
    if (m.name.ends_with(suffix))
      for (const auto& o : m.forward) out.push_back(&o);
  return out;
}

// Korthikanti et al. 2022 section 5: recompute the attention core (everything between the
// q/k/v projections and the output projection), keep its inputs (q, k, v). `all`: the bytes the
// block saves without checkpointing.
void checkpoint_selective(Layer& l, std::int64_t all, bool stops_early) {
  std::int64_t core_saved = 0, qkv = 0;
  const std::vector<const Op*> core = forward_ops(l, ".attn.core");
  const std::size_t end = recompute_end(core, stops_early);
  for (std::size_t i = 0; i < core.size(); ++i) {
    const Op& o = *core[i];
    if (o.cls == KernelClass::Attention) qkv = o.read.count;  // q, k, v stay saved; out and lse are recomputed
    core_saved += o.saved.count;
    if (i < end) l.recompute.push_back(o);
  }
  l.saved_activations = Bytes{all - core_saved + qkv};
  l.recompute_activations = Bytes{core_saved};
}

// torchtitan _save_list policy: save the outputs of the attention kernel and of every other
// mm (the first, third, ... in forward order), recompute everything else. Kept: the block
// input, the saved mm outputs (T x n of each) and the attention outputs; recomputed: every
// memory-bound op and the other half of the GEMMs.
void checkpoint_op_sac(Layer& l, std::int64_t all, std::int64_t input, const Dims& d, bool stops_early) {
  std::int64_t kept = input;
  int mm = 0;
  const std::vector<const Op*> ops = forward_ops(l);
  const std::size_t end = recompute_end(ops, stops_early);
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const Op& o = *ops[i];
    if (o.cls == KernelClass::Gemm && o.work.gemms.front().batch == 1) {
      const GemmShape& g = o.work.gemms.front();
      if (mm++ % 2 == 0) {
        kept += g.m * g.n * d.e;
        continue;
      }
    } else if (o.cls == KernelClass::Attention) {
      kept += o.written.count;
      continue;
    }
    if (i < end) l.recompute.push_back(o);
  }
  kept = std::min(kept, all);
  l.saved_activations = Bytes{kept};
  l.recompute_activations = Bytes{all - kept};
}

// Applies a checkpointing policy to a block built without one; `stops_early`: the recompute ends
// at the last saved tensor (recompute_end).
void checkpoint(Layer& l, Checkpointing c, const Dims& d, bool stops_early) {
  const std::int64_t all = saved_of(l);
  const std::int64_t input = d.T * d.h * d.e;
  switch (c) {
    case Checkpointing::None:
    case Checkpointing::EveryK:  // per block: decided by the caller
      l.saved_activations = Bytes{all};
      return;
    case Checkpointing::Full: {
      // torch.utils.checkpoint: only the block input survives forward; backward re-runs the
      // block forward (same ops, same kernels) before the block's backward.
      l.saved_activations = Bytes{input};
      const std::vector<const Op*> ops = forward_ops(l);
      const std::size_t end = recompute_end(ops, stops_early);
      for (std::size_t i = 0; i < end; ++i) l.recompute.push_back(*ops[i]);
      l.recompute_activations = Bytes{all};
      return;
    }
    case Checkpointing::Selective:
      checkpoint_selective(l, all, stops_early);
      return;
    case Checkpointing::OpSac:
      checkpoint_op_sac(l, all, input, d, stops_early);
      return;
  }
}

// The causal mask HF builds on every forward, after the token lookup.
void attention_mask_ops(Module& tok, const ModelDims& md, const Dims& d) {
  const std::int64_t b = d.b, s = d.s, e = d.e;
  if (md.family == "gpt") {
    // GPT-2 builds its additive mask from the attention mask over b*s*s elements (not read off a
    // trace; unchanged: priced by bytes alone, its elements per kernel unknown).
    tok.forward.push_back(mem("attention_mask.prepare", KernelClass::ElementwiseStrided, b * s * s * 6, b * s * s * 6, 0, 12));
    return;
  }
  // HF OPT / Llama (transformers 4.36, modeling_attn_mask_utils.py) build the 4-D causal mask
  // on every forward, _prepare_4d_causal_attention_mask -> AttentionMaskConverter.to_4d: twelve
  // eager aten ops, each its own dispatch (at the step's start the GPU waits for every one):
  //  _make_causal_mask: torch.full((s, s), min) [fp32: the default dtype], arange(s),
  //    mask_cond + 1, lt against its view(s, 1) [strided, bool out], masked_fill_, .to(dtype)
  //    [a cast];
  //  _expand_mask: mask[:, None, None, :].expand(b, 1, s, s).to(dtype) [strided copy of the int64
  //    mask], 1.0 - expanded [rsub], .to(torch.bool), inverted.masked_fill(bool, min) [out of
  //    place: a clone, then the fill];
  //  to_4d: expanded.bool(), causal_4d_mask.masked_fill(bool, min) [the clone of the causal
  //    mask broadcast to b: a strided copy, then the fill].
  // The li-plus trace's OPTDecoder shows these 12 ops, their 13 kernels (6 vectorized, 7 on the
  // strided path) and one DtoD memcpy (the first masked_fill's clone of a contiguous tensor).
  const std::int64_t ss = s * s, bss = b * s * s;
  tok.forward.push_back(mem("causal_mask.full", KernelClass::Elementwise, 0, ss * 4));
  tok.forward.push_back(strided("causal_mask.arange", 0, s * 8, s));
  tok.forward.push_back(mem("causal_mask.arange_add", KernelClass::Elementwise, s * 8, s * 8));
  tok.forward.push_back(strided("causal_mask.lt", 2 * s * 8, ss, ss));
  tok.forward.push_back(mem("causal_mask.masked_fill_", KernelClass::Elementwise, ss * 4 + ss, ss * 4));
  tok.forward.push_back(strided("causal_mask.to_dtype", ss * 4, ss * e, ss));
  tok.forward.push_back(strided("padding_mask.expand_to_dtype", b * s * 8, bss * e, bss));
  tok.forward.push_back(mem("padding_mask.rsub", KernelClass::Elementwise, bss * e, bss * e));
  tok.forward.push_back(strided("padding_mask.to_bool", bss * e, bss, bss));
  tok.forward.push_back(mem("padding_mask.masked_fill.clone", KernelClass::Copy, bss * e, bss * e, 0, 0));
  tok.forward.push_back(continued(mem("padding_mask.masked_fill_", KernelClass::Elementwise, bss * e + bss, bss * e)));
  tok.forward.push_back(strided("padding_mask.to_bool", bss * e, bss, bss));
  tok.forward.push_back(strided("mask_4d.masked_fill.clone", ss * e, bss * e, bss));
  tok.forward.push_back(continued(mem("mask_4d.masked_fill_", KernelClass::Elementwise, bss * e + bss, bss * e)));
}

// The token embedding (with HF's mask preparation after it) and its backward.
Module token_embedding(const ModelDims& md, const Dims& d, const WorkloadOptions& o) {
  const std::int64_t T = d.T, h = d.h, e = d.e, n = T * h;
  Module tok;
  tok.name = "embed.tokens";
  tok.params.push_back(Param{"embed.tokens.weight", d.V * h, d.V});
  // aten::embedding -> index_select; saves the int64 ids.
  tok.forward.push_back(mem("embedding", KernelClass::Embedding, T * 8 + n * e, n * e, T * 8));
  // HF 4.36 looks the tokens up first (OPTDecoder / LlamaModel.forward: inputs_embeds =
  // self.embed_tokens(input_ids)), then builds the mask.
  if (o.impl == Implementation::Hf) attention_mask_ops(tok, md, d);
  // embedding_dense_backward (aten/src/ATen/native/cuda/Embedding.cu, embedding_dense_backward_cuda,
  // the same aten op for every family's nn.Embedding / F.embedding):
  tok.backward = embedding_backward(d, d.V);
  if (md.tied_embeddings) {
    // A tied head (OPT, GPT-2, MPT) sends the weight two gradients, the lm_head's (MmBackward0)
    // and the embedding's; autograd's InputBuffer sums them out of place before AccumulateGrad
    // (torch/csrc/autograd/input_buffer.cpp accumulate: `old_var + var`): one vectorized add
    // over V x h, the trace's `EmbeddingBackward0 > aten::add` after the embedding backward.
    tok.backward.push_back(param_grad(mem("tied_weight.grad_add", KernelClass::Elementwise, 2 * d.V * h * e, d.V * h * e)));
  }
  return tok;
}

// The learned position table (`positions` rows): the lookup added to the token embedding.
Module position_embedding(const ModelDims& md, const Dims& d, std::int64_t positions) {
  const std::int64_t b = d.b, s = d.s, T = d.T, h = d.h, e = d.e, n = T * h;
  Module pos;
  pos.name = "embed.positions";
  pos.params.push_back(Param{"embed.positions.weight", positions * h, positions});
  // OPT computes positions from the mask (cumsum, mul, sub, add: 4 eager ops), then looks them up.
  // OPTLearnedPositionalEmbedding.forward (transformers 4.36 modeling_opt.py):
  // `(torch.cumsum(attention_mask, dim=1).type_as(attention_mask) * attention_mask).long() - 1`,
  // then `positions + self.offset`: a scan kernel (tensor_kernel_scan_innermost_dim, a
  // reduction-like pass) and mul, sub, add over b x s int64.
  if (md.family == "opt") {
    pos.forward.push_back(mem("positions.cumsum", KernelClass::Reduction, b * s * 8, b * s * 8));
    pos.forward.push_back(mem("positions.mul", KernelClass::Elementwise, 2 * b * s * 8, b * s * 8));
    pos.forward.push_back(mem("positions.sub", KernelClass::Elementwise, b * s * 8, b * s * 8));
    pos.forward.push_back(mem("positions.add_offset", KernelClass::Elementwise, b * s * 8, b * s * 8));
  }
  pos.forward.push_back(mem("embedding", KernelClass::Embedding, T * 8 + n * e, n * e, 0));
  pos.forward.push_back(mem("add", KernelClass::Elementwise, 2 * n * e, n * e));
  pos.backward = embedding_backward(d, positions);
  return pos;
}

// The embedding layer: token and position lookups, GPT-2's embedding dropout.
Layer embedding_layer(const ModelDims& md, const Dims& d, const WorkloadOptions& o) {
  Layer embed;
  embed.name = "embed";
  embed.kind = LayerKind::Embedding;
  embed.modules.push_back(token_embedding(md, d, o));
  // MPT's learned position table has max_seq_len rows: the run's sequence length.
  const std::int64_t positions = md.family == "mpt" ? d.s : md.max_positions;
  if (positions > 0) embed.modules.push_back(position_embedding(md, d, positions));
  if (md.family == "gpt" && o.impl == Implementation::Hf && o.dropout > 0) {
    std::vector<Op> bfront;
    dropout(embed.modules.back().forward.mut(), bfront, d.T * d.h, d.e, o.dropout);
    auto& bw = embed.modules.back().backward;
    bw.insert(bw.begin(), bfront.begin(), bfront.end());
  }
  embed.saved_activations = Bytes{saved_of(embed)};
  // An Embedding node per table, the Add of token and position embeddings, GPT-2's dropout.
  const auto tables = static_cast<std::int64_t>(embed.modules.size());
  embed.autograd_nodes = tables + (tables > 1 ? 1 : 0) + (md.family == "gpt" && o.impl == Implementation::Hf && o.dropout > 0 ? 1 : 0);
  return embed;
}

// Whether `name` is block `from`'s ("block.0") or one of its parts' ("block.0.attn.q_proj").
bool names_block(std::string_view name, std::string_view from) {
  return name.starts_with(from) && (name.size() == from.size() || name[from.size()] == '.');
}
// Whether `name` names block `to` ("block.3") as `first_name` names block `from` ("block.0"): the
// names of a block differ from the first block's in that prefix only (renamed_block).
bool renamed_name(std::string_view name, std::string_view first_name, std::string_view from, std::string_view to) {
  if (!names_block(first_name, from)) return name == first_name;
  return name.size() == to.size() + first_name.size() - from.size() && name.starts_with(to) &&
         name.substr(to.size()) == first_name.substr(from.size());
}

// Block `index` from the first block: the blocks differ only in the prefix of their layer's,
// modules', parameters' and ops' names, "block.{index}" (BlockBuilder's `p`). Building each
// block was most of a workload's build, which a sweep over sequence lengths or micro-batches
// pays at every point past its cached workloads, and a process once. `shell` is `first` without
// its modules (everything else of the layer is copied from it); the modules are made field by
// field (Module), each name once at its new length: a copy renamed in place allocated every name
// of a block past the ninth twice.
Layer renamed_block(const Layer& first, const Layer& shell, int index) {
  const std::string& from = first.name;
  const std::string to = fmt::format("block.{}", index);
  auto renamed = [&](const std::string& s) {
    if (!names_block(s, from)) return s;
    std::string r;
    r.reserve(to.size() + s.size() - from.size());
    r.append(to).append(s, from.size());
    return r;
  };
  // An op list stays shared with the first block's (OpList) unless one of its ops names the block.
  auto rename_ops = [&](OpList& ops) {
    for (std::size_t i = 0; i < ops.size(); ++i)
      if (names_block(std::as_const(ops)[i].name, from)) ops[i].name = renamed(std::as_const(ops)[i].name);
  };
  Layer l = shell;
  l.name = renamed(first.name);
  l.modules.reserve(first.modules.size());
  for (const Module& fm : first.modules) {
    Module& m = l.modules.emplace_back();
    m.name = renamed(fm.name);
    m.params.reserve(fm.params.size());
    for (const Param& p : fm.params) m.params.push_back(Param{renamed(p.name), p.numel, p.dim0});
    m.forward = fm.forward;
    m.backward = fm.backward;
    m.first_launch = fm.first_launch;
    rename_ops(m.forward);
    rename_ops(m.backward);
  }
  rename_ops(l.recompute);
  return l;
}

// A workload built before, whose names this build takes where they are the ones it would form
// (build_transformer's `recycled`). A sweep over sequence lengths or micro-batches builds a
// workload at nearly every point, and its names (a block's layer, module and parameter names, a
// heap string each, and every launch's name) were most of the build and of freeing the workload
// after, though they are the same at every point (issue 49).
struct Recycling {
  Workload* old = nullptr;
  // Whether every layer so far has the launch names `old`'s layer at its index has: the names
  // form_launch_name reads are the same (the layer's, its modules', their ops'), and so are the
  // lengths of the op lists.
  bool launch_names_same = true;
  // The op lists last compared at each place of a block (a module's forward, its backward, the
  // recompute list): the blocks of both workloads share their lists, so a place compares the same
  // two lists block after block.
  struct Compared {
    const Op* a = nullptr;
    const Op* b = nullptr;
    bool same = false;
  };
  std::vector<Compared> compared;

  // Whether the ops of `a` and `b` have the same names; `place` indexes `compared` (none: -1).
  bool same_op_names(const OpList& a, const OpList& b, std::ptrdiff_t place = -1) {
    if (a.size() != b.size()) return false;
    if (a.empty()) return true;
    Compared* c = nullptr;
    if (place >= 0) {
      if (compared.size() <= static_cast<std::size_t>(place)) compared.resize(static_cast<std::size_t>(place) + 1);
      c = &compared[static_cast<std::size_t>(place)];
      if (c->a == a.data() && c->b == b.data()) return c->same;
    }
    bool same = true;
    for (std::size_t i = 0; i < a.size() && same; ++i) same = a[i].name == b[i].name;
    if (c) *c = Compared{a.data(), b.data(), same};
    return same;
  }
  // Whether `l` names its launches as `was` did (both built before name_launches ran on `l`).
  bool same_launch_inputs(const Layer& l, const Layer& was) {
    if (l.name != was.name || l.modules.size() != was.modules.size() || !same_op_names(l.recompute, was.recompute)) return false;
    for (std::size_t k = 0; k < l.modules.size(); ++k) {
      const Module &m = l.modules[k], &w = was.modules[k];
      if (m.name != w.name || !same_op_names(m.forward, w.forward) || !same_op_names(m.backward, w.backward)) return false;
    }
    return true;
  }
};

// renamed_block(first, shell, index) made from `old`, a block of a workload built before: its
// names (the layer's, its modules', their parameters') are moved in where they are the ones
// renamed_block forms, checked name by name, and none is formed; nullopt where one differs (a
// workload of another model). Everything else comes from `first` and `shell` as in
// renamed_block. Notes in `r` whether the block's launch names are `old`'s.
std::optional<Layer> recycled_block(Layer& old, const Layer& first, const Layer& shell, int index, Recycling& r) {
  const std::string& from = first.name;
  const std::string to = fmt::format("block.{}", index);
  if (old.kind != LayerKind::Block || old.modules.size() != first.modules.size() || !renamed_name(old.name, from, from, to)) return std::nullopt;
  for (std::size_t k = 0; k < first.modules.size(); ++k) {
    const Module &fm = first.modules[k], &om = old.modules[k];
    if (om.params.size() != fm.params.size() || !renamed_name(om.name, fm.name, from, to)) return std::nullopt;
    for (std::size_t j = 0; j < fm.params.size(); ++j)
      if (!renamed_name(om.params[j].name, fm.params[j].name, from, to)) return std::nullopt;
  }
  // Its launch names, read before its op lists are replaced (its names are the renamed ones).
  const auto modules = static_cast<std::ptrdiff_t>(first.modules.size());
  bool same = r.same_op_names(shell.recompute, old.recompute, 2 * modules);
  for (std::ptrdiff_t k = 0; k < modules && same; ++k) {
    const auto i = static_cast<std::size_t>(k);
    same = r.same_op_names(first.modules[i].forward, old.modules[i].forward, 2 * k) &&
           r.same_op_names(first.modules[i].backward, old.modules[i].backward, 2 * k + 1);
  }
  r.launch_names_same = r.launch_names_same && same;
  Layer l = shell;
  l.name = std::move(old.name);
  l.modules = std::move(old.modules);
  for (std::size_t k = 0; k < first.modules.size(); ++k) {
    const Module& fm = first.modules[k];
    Module& m = l.modules[k];
    for (std::size_t j = 0; j < fm.params.size(); ++j) {
      m.params[j].numel = fm.params[j].numel;
      m.params[j].dim0 = fm.params[j].dim0;
    }
    m.forward = fm.forward;
    m.backward = fm.backward;
    m.first_launch = fm.first_launch;
  }
  return l;
}

// Whether an op of `l`'s lists names the block (renamed_block then gives the block lists of its
// own, which recycled_block does not).
bool ops_name_block(const Layer& l) {
  auto names = [&](const OpList& ops) {
    return std::any_of(ops.begin(), ops.end(), [&](const Op& op) { return names_block(op.name, l.name); });
  };
  if (names(l.recompute)) return true;
  return std::any_of(l.modules.begin(), l.modules.end(), [&](const Module& m) { return names(m.forward) || names(m.backward); });
}

// The transformer blocks, each with its checkpointing policy applied; `o` resolved (its
// checkpoint_early_stop set: build_transformer). With `r`, the blocks past the first take the
// names of `r.old`'s blocks at their index where those are theirs (recycled_block).
void add_blocks(Workload& w, const ModelDims& md, const Dims& d, const WorkloadOptions& o, Recycling* r) {
  BlockBuild bb{md, d, o};
  const Layer first = block(0, bb);
  // The first block under each policy a block may get (EveryK: full or none), which the other
  // blocks copy and rename: their op lists are the first block's (OpList).
  auto with_policy = [&](Checkpointing c) {
    Layer l = first;
    checkpoint(l, c, d, o.checkpoint_early_stop.value_or(false));
    saved_tensors_per_op(l);
    l.autograd_nodes = block_autograd_nodes(md, d, o);
    return l;
  };
  const bool every_k = o.checkpointing == Checkpointing::EveryK;
  const Layer checkpointed = with_policy(every_k ? Checkpointing::Full : o.checkpointing);
  const Layer plain = every_k ? with_policy(Checkpointing::None) : Layer{};
  auto shell_of = [](const Layer& l) {
    Layer shell = l;
    shell.modules.clear();
    return shell;
  };
  const Layer checkpointed_shell = shell_of(checkpointed), plain_shell = shell_of(plain);
  if (r && (ops_name_block(checkpointed) || (every_k && ops_name_block(plain)))) {
    r->launch_names_same = false;
    r = nullptr;
  }
  w.layers.reserve(w.layers.size() + static_cast<std::size_t>(md.layers));
  for (int i = 0; i < md.layers; ++i) {
    // EveryK: the k-th, 2k-th, ... block counted from 1 (Checkpointing)
    const bool full = !every_k || (i + 1) % std::max(1, o.checkpoint_every) == 0;
    const Layer& from = full ? checkpointed : plain;
    const Layer& shell = full ? checkpointed_shell : plain_shell;
    const std::size_t at = w.layers.size();
    std::optional<Layer> recycled;
    if (i > 0 && r && at < r->old->layers.size()) recycled = recycled_block(r->old->layers[at], from, shell, i, *r);
    if (r && i > 0 && !recycled) r->launch_names_same = false;
    // Not `i == 0 ? from : renamed_block(...)`: that is a const prvalue, which push_back copies.
    if (i == 0) w.layers.push_back(from);
    else if (recycled) w.layers.push_back(std::move(*recycled));
    else w.layers.push_back(renamed_block(from, shell, i));
  }
}

// The norm after the last block.
Layer final_norm_layer(const ModelDims& md, const Dims& d, const WorkloadOptions& o) {
  const bool llama = md.family == "llama";
  Layer fnorm;
  fnorm.name = "norm";
  fnorm.kind = LayerKind::Norm;
  fnorm.modules.push_back(norm("norm", llama ? NormKind::RmsNormFp32 : o.impl == Implementation::Megatron ? NormKind::ApexLayerNorm
                                                                                                          : NormKind::LayerNorm,
                               !llama, d, o.compile));
  fnorm.saved_activations = Bytes{saved_of(fnorm)};
  // RMSNorm's eight pointwise nodes, or one norm node (torch.compile wraps the blocks only).
  fnorm.autograd_nodes = llama ? 8 : 1;
  return fnorm;
}

// HF OPT / GPT-2's loss in the model dtype over shifted logits; sets the head's transient
// logits-sized gradients.
Module shifted_logits_loss(const Dims& d, Layer& head) {
  const std::int64_t T = d.T, e = d.e, TV = T * d.V;
  Module loss;
  loss.name = "head.loss";
  // OPTForCausalLM / GPT2LMHeadModel.forward (transformers 4.36): `shift_logits =
  // logits[..., :-1, :].contiguous()`, `shift_labels = labels[..., 1:].contiguous()` (two
  // strided copies, the second over the int64 labels), CrossEntropyLoss -> log_softmax +
  // nll_loss_forward (one nll_loss_forward_reduce_cuda_kernel_2d: the li-plus trace).
  // The shifted copy is a temporary of the model's forward, read by log_softmax and freed as the
  // forward returns (the li-plus ZeRO-1 trace: allocated at 88.56 ms, freed at 88.98 ms, after the
  // loss and before the previous step's logits); log_softmax's output is its own saved tensor.
  loss.forward.push_back(strided("shift_logits.contiguous", TV * e, TV * e, TV));
  loss.forward.back().transient = Bytes{TV * e};
  loss.forward.back().transient_consumers = 3;
  loss.forward.push_back(strided("shift_labels.contiguous", T * 8, T * 8, T));
  loss.forward.push_back(mem("log_softmax", KernelClass::Reduction, TV * e, TV * e, TV * e));
  loss.forward.back().own_saved_tensor = true;
  loss.forward.push_back(mem("nll_loss", KernelClass::Reduction, T * 16, 8));
  // NllLossBackward0: grad_input = zeros_like(self) [fill over T x V], then
  // nll_loss_backward_reduce_cuda_kernel_2d scatters -1/N at each target [T x 8 read, T x e written].
  loss.backward.push_back(mem("nll_loss.bwd.zero", KernelClass::Elementwise, 0, TV * e));
  loss.backward.push_back(mem("nll_loss.bwd", KernelClass::Reduction, T * 16, T * e));
  loss.backward.push_back(mem("log_softmax.bwd", KernelClass::Reduction, 2 * TV * e, TV * e));
  // SliceBackward0 of `logits[..., :-1, :]`: the li-plus trace shows two aten::slice_backward,
  // each `at::zeros` of the full logits shape (two vectorized fills of equal length), and one
  // strided copy of the gradient into the :-1 slice (the kernels as traced; why the second
  // slice_backward launches no copy of its own was not looked into).
  loss.backward.push_back(mem("shift.slice_bwd.zero", KernelClass::Elementwise, 0, 2 * TV * e, 0, 2));
  loss.backward.push_back(strided("shift.slice_bwd", TV * e, TV * e, TV));
  head.recompute_activations = Bytes{2 * TV * e};  // logits gradient and the shifted copy's
  head.backward_transients = {Bytes{TV * e}, Bytes{TV * e}};
  return loss;
}

// The loss over logits upcast to fp32 (torchtitan, llm-foundry, Megatron, HF Llama); sets the
// head's transient logits-sized gradients.
Module fp32_logits_loss(const Dims& d, const WorkloadOptions& o, Layer& head) {
  const std::int64_t T = d.T, e = d.e, TV = T * d.V;
  Module loss;
  loss.name = "head.loss";
  loss.forward.push_back(mem("logits.float", KernelClass::Elementwise, TV * e, TV * 4));
  loss.forward.push_back(mem("log_softmax", KernelClass::Reduction, TV * 4, TV * 4, TV * 4));
  loss.forward.back().own_saved_tensor = true;
  loss.forward.push_back(mem("nll_loss", KernelClass::Reduction, T * 16, 8, 0, 2));
  loss.backward.push_back(mem("nll_loss.bwd", KernelClass::Elementwise, T * 16, TV * 4, 0, 2));
  loss.backward.push_back(mem("log_softmax.bwd", KernelClass::Reduction, 2 * TV * 4, TV * 4));
  loss.backward.push_back(mem("logits.float.bwd", KernelClass::Elementwise, TV * 4, TV * e));
  // fp32 and bf16 logits gradients. log_softmax_backward_data allocates its fp32 grad_input
  // while nll_loss's fp32 gradient, its input, is alive: two fp32 logits-sized tensors at once
  // (aten/src/ATen/native/cuda/SoftMax.cu). Megatron's fused vocab-parallel cross entropy
  // writes the gradient into its saved softmax instead (tensor_parallel/cross_entropy.py).
  const bool fused_ce = o.impl == Implementation::Megatron;
  head.recompute_activations = Bytes{fused_ce ? TV * (4 + e) : std::max(2 * TV * 4, TV * (4 + e))};
  if (!fused_ce) head.backward_transients = {Bytes{TV * 4}, Bytes{TV * 4}};
  return loss;
}

// llm-foundry's default loss (modeling_mpt.py ComposerMPTCausalLM at c6cfb4284 l.711 and
// 061f2c7c l.723: `loss_fn` defaults to 'fused_crossentropy', flash_attn.losses.cross_entropy's
// CrossEntropyLoss, never set by the benchmark yamls): one xentropy_cuda_lib kernel over the bf16
// logits (the custom autograd Function is outside autocast's fp32 list; "SoftmaxCrossEntropyLoss
// implicitly casts to float" inside the kernel) writing the fp32 losses and log-sum-exp, which it
// saves with the logits; `losses.masked_fill_(labels == ignored_index, 0)`, then
// `loss.sum() / (target != ignore_index).sum()`. Backward: the mean's gradient made contiguous,
// masked, and one xentropy backward kernel writing the bf16 logits gradient (inplace_backward
// False: a new tensor). No fp32 copy of the logits exists.
Module fused_xentropy_loss(const Dims& d, bool logits_kept, Layer& head) {
  const std::int64_t T = d.T, e = d.e, TV = T * d.V;
  Module loss;
  loss.name = "head.loss";
  // The saved logits are the tensor the training loop keeps when it keeps one: counted there.
  loss.forward.push_back(mem("xentropy", KernelClass::Reduction, TV * e + T * 8, T * 8, T * 4 + (logits_kept ? 0 : TV * e)));
  loss.forward.back().own_saved_tensor = true;
  loss.forward.push_back(mem("losses.masked_fill", KernelClass::Elementwise, T * 12, T * 5, 0, 2));
  loss.forward.push_back(mem("loss.mean", KernelClass::Reduction, T * 12, 8, 0, 4));
  loss.backward.push_back(mem("loss.mean.bwd", KernelClass::Elementwise, 8, T * 4, 0, 2));
  loss.backward.push_back(mem("grad_loss.masked_fill", KernelClass::Elementwise, T * 12, T * 5, 0, 2));
  loss.backward.push_back(mem("xentropy.bwd", KernelClass::Reduction, TV * e + T * 16, TV * e));
  head.recompute_activations = Bytes{TV * e};  // the logits gradient
  return loss;
}

// The training loop's default (training_loop_keeps_output: hf_script and composer keep it; the
// HF Trainer's compute_loss returns only the loss) unless the workload states it.
bool loop_keeps_output(const WorkloadOptions& o) {
  return o.loop_keeps_output.value_or(training_loop_keeps_output(o.training_loop())) && o.impl != Implementation::Megatron;
}

// The model output the training loop keeps (WorkloadOptions::loop_keeps_output): the logits as
// the model returns them. HF OPT/GPT-2 return the lm_head output in the model dtype
// (modeling_opt.py `logits = self.lm_head(outputs[0]).contiguous()`), HF Llama its fp32 copy
// (`logits = logits.float()`), both after computing the loss from it; llm-foundry's MPT returns
// the bf16 lm_head output and Composer computes the loss outside (`self.state.outputs =
// self.state.model(batch)`, then `loss(self.state.outputs, batch)`); torchtitan returns
// `self.output(h).float()` (models/llama/model.py at 83c879f1), the loss outside. Megatron's
// model returns the loss, so nothing the size of the logits outlives it.
// `shifted`: the HF loss over shifted bf16 logits (head_layer).
void mark_kept_output(Workload& w, Module& lm, Module& loss, bool shifted, const Dims& d, const WorkloadOptions& o) {
  const bool hf = o.impl == Implementation::Hf;
  if (!loop_keeps_output(o)) return;
  const bool bit16 = shifted || o.impl == Implementation::LlmFoundry;  // else the fp32 copy ("logits.float")
  Op& logits = bit16 ? lm.forward.back() : loss.forward.front();
  logits.kept_output = Bytes{d.T * d.V * (bit16 ? d.e : 4)};
  Op& returns = hf ? loss.forward.back() : logits;
  returns.model_returns = true;
  w.kept_output = logits.kept_output;
}

// LM head + cross-entropy. Tied heads (gpt, opt, mpt) reuse the embedding weight: compute, no
// parameters. The loss: HF (OPT/GPT-2/Llama of 2023, model in bf16 under DeepSpeed) shifts the
// logits with a strided .contiguous() copy and runs log_softmax in bf16; torchtitan
// (cross_entropy(pred.float())) and Megatron (fp32 vocab-parallel cross entropy) upcast the
// logits to fp32 first (saved: the head input and log_softmax's output; the fp32 copy and the
// logits gradient are transients); llm-foundry runs flash_attn's fused cross entropy over the
// bf16 logits (fused_xentropy_loss).
Layer head_layer(Workload& w, const ModelDims& md, const Dims& d, const WorkloadOptions& o) {
  Layer head;
  head.name = "head";
  head.kind = LayerKind::Head;
  Module lm = linear("head.lm_head", d.h, d.V, false, d, d.T * d.h * d.e);
  if (md.tied_embeddings) lm.params.clear();
  const bool shifted = o.impl == Implementation::Hf && md.family != "llama";
  Module loss = shifted                                ? shifted_logits_loss(d, head)
                : o.impl == Implementation::LlmFoundry ? fused_xentropy_loss(d, loop_keeps_output(o), head)
                                                       : fp32_logits_loss(d, o, head);
  mark_kept_output(w, lm, loss, shifted, d, o);
  w.loss_dtype = shifted ? w.dtype : Dtype::FP32;
  // Where the loss upcasts (`self.output(h).float()`, HF Llama's `logits.float()`, Megatron's
  // `output.float()`), lm_head's bf16 output is a temporary alive until the fp32 copy is written;
  // the fp32 copy, unless the loop keeps it, is one alive until the loss has read it (torchtitan
  // after #391: `del pred` before `loss.backward()`; Megatron's model returns the loss).
  if (!shifted && o.impl != Implementation::LlmFoundry) {
    lm.forward.back().transient = Bytes{d.T * d.V * d.e};
    Op& upcast = loss.forward.front();
    if (upcast.kept_output.count == 0) {
      upcast.transient = Bytes{d.T * d.V * 4};
      upcast.transient_consumers = static_cast<int>(loss.forward.size());
    }
  }
  head.modules.push_back(lm);
  head.modules.push_back(loss);
  head.saved_activations = Bytes{saved_of(head)};
  head.autograd_nodes = head_autograd_nodes(shifted, o);
  return head;
}

// ---- modded-nanogpt (family nanogpt, implementation modded_nanogpt) -------------------------
//
// KellerJordan/modded-nanogpt's GPT as its October 2024 records run it
// (records/track_1_short/2024-10-14_ModernArch/train_gpt2.py; 2024-10-17_DistributedMuon and
// 2024-10-18_PyTorch25 keep the model): token embedding, blocks of
// `x = x + attn(F.rms_norm(x))` and `x = x + mlp(F.rms_norm(x))`, a final F.rms_norm, the lm_head
// tied to the embedding, `logits.float()` and F.cross_entropy inside forward. No biases, no norm
// weights; attention: c_q, c_k, c_v (separate), rotary and F.rms_norm of q and k over the head
// (QK-norm), sdpa(is_causal=True), `y.transpose(1, 2).contiguous()`, c_proj; MLP: c_fc,
// `F.relu(x).square()`, c_proj. The parameters stay fp32 (`model.cuda()`) under
// `torch.amp.autocast(dtype=bfloat16)`: the embedding's output and with it the residual stream are
// fp32, every linear casts its input and its weight to bf16 and writes bf16.
//
// `model = torch.compile(model)` compiles the whole forward, loss included, as one graph, so the
// ops below are Inductor's kernels, not aten's: each run of pointwise and reduction work between
// two GEMMs or the attention kernel is one generated kernel (mm runs as cuBLAS, not a template:
// max_autotune is off). Assumed where the records' logs do not say (no trace of these runs is
// public): AOTAutograd's min-cut partitioner saves the fp32 residual stream and the GEMM inputs'
// sources and recomputes the pointwise work between them in backward (one kernel before the
// weight gradients that need it); the residual add and the next norm are separate kernels (one
// read of the stream counted twice, about 1 % of the step's memory traffic); the cross entropy
// reads the bf16 logits once per pass (its row of 50,304 logits, 100 KB, re-read from L2).
namespace nanogpt {

constexpr std::int64_t kF32 = 4;

// A linear without bias under autocast: the weight's bf16 copy (a kernel; saved for the input
// gradient), the GEMM, and in backward the input and weight gradients, the latter cast to the
// fp32 parameter's dtype (AccumulateGrad's .grad).
Module linear(const std::string& name, std::int64_t in, std::int64_t out, const Dims& d, std::int64_t saved_input) {
  Module m = stepsim::linear(name, in, out, false, d, saved_input);
  const std::int64_t p = in * out;
  m.forward.insert(m.forward.begin(), mem("weight.to_bf16", KernelClass::Elementwise, p * kF32, p * d.e, p * d.e));
  m.backward.push_back(param_grad(mem("wgrad.to_fp32", KernelClass::Elementwise, p * d.e, p * kF32)));
  return m;
}

Module ops(std::string name, std::vector<Op> forward, std::vector<Op> backward) {
  return Module{std::move(name), {}, std::move(forward), std::move(backward)};
}

// F.rms_norm of the fp32 stream, cast to bf16 for the GEMM after it; saved: the stream and the
// inverse RMS. Backward: one kernel reading the `grads` bf16 gradients that meet at its output
// (the consumers' input gradients, summed), the stream and its gradient, and writing the
// stream's gradient.
Module rms_norm(std::string name, const Dims& d, int grads) {
  const std::int64_t n = d.T * d.h, rows = d.T;
  return ops(std::move(name), {mem("rms_norm", KernelClass::Norm, n * kF32, n * d.e + rows * kF32, n * kF32 + rows * kF32)},
             {mem("rms_norm.bwd", KernelClass::Norm, grads * n * d.e + 2 * n * kF32 + rows * kF32, n * kF32)});
}

Layer block(int index, const Dims& d, const WorkloadOptions& o) {
  const std::int64_t n = d.T * d.h, In = d.T * d.I, e = d.e, rows = d.T;
  const std::string p = fmt::format("block.{}", index);
  Layer l;
  l.name = p;
  l.kind = LayerKind::Block;
  // The three projections' input gradients meet at the norm; its normalised output is recomputed
  // for their weight gradients.
  l.modules.push_back(rms_norm(p + ".attn_norm", d, 3));
  Module q = linear(p + ".attn.c_q", d.h, d.h, d, 0);
  Module k = linear(p + ".attn.c_k", d.h, d.h, d, 0);
  Module v = linear(p + ".attn.c_v", d.h, d.h, d, 0);
  // Backward reaches c_v first (reverse order): the normalised input is recomputed there.
  v.backward.insert(v.backward.begin() + 1, mem("rms_norm.recompute", KernelClass::Elementwise, n * kF32 + rows * kF32, n * e));
  l.modules.push_back(std::move(q));
  l.modules.push_back(std::move(k));
  l.modules.push_back(std::move(v));
  // Rotary and the QK-norm of q and k: one kernel reading q and k (saved) and writing the
  // attention's inputs, recomputed in backward before the attention's; then one kernel for
  // their gradients.
  const std::int64_t qk = 2 * n;
  l.modules.push_back(ops(p + ".attn.rotary_qk_norm", {mem("rotary_qk_norm", KernelClass::Elementwise, qk * e, qk * e, qk * e)},
                          {mem("rotary_qk_norm.bwd", KernelClass::Reduction, 2 * qk * e, qk * e)}));
  // The attention keeps v, its output and the log-sum-exp; the output's transposed copy (c_proj's
  // input) is recomputed for c_proj's weight gradient.
  Module core = fused_attention(p + ".attn.core", d, o.attention, d.h, 3, o.flash_attn());
  core.forward.front().saved = Bytes{2 * n * e + d.b * d.H * d.s * 4};
  core.forward.push_back(mem("out.transpose_contiguous", KernelClass::Elementwise, n * e, n * e));
  core.backward.insert(core.backward.begin(), {mem("out.grad_transpose", KernelClass::Elementwise, n * e, n * e),
                                               mem("rotary_qk_norm.recompute", KernelClass::Elementwise, qk * e, qk * e)});
  l.modules.push_back(std::move(core));
  Module proj = linear(p + ".attn.c_proj", d.h, d.h, d, 0);
  proj.backward.insert(proj.backward.begin() + 1, mem("out.transpose_recompute", KernelClass::Elementwise, n * e, n * e));
  proj.forward.push_back(mem("residual_add", KernelClass::Elementwise, n * (kF32 + e), n * kF32));
  l.modules.push_back(std::move(proj));
  l.modules.push_back(rms_norm(p + ".mlp_norm", d, 1));
  Module fc = linear(p + ".mlp.c_fc", d.h, d.I, d, 0);
  fc.backward.insert(fc.backward.begin() + 1, mem("rms_norm.recompute", KernelClass::Elementwise, n * kF32 + rows * kF32, n * e));
  l.modules.push_back(std::move(fc));
  // relu(x).square(): saves its input; backward recomputes the output for c_proj's weight
  // gradient, then the activation's gradient.
  l.modules.push_back(ops(p + ".mlp.relu_square", {mem("relu_square", KernelClass::Elementwise, In * e, In * e, In * e)},
                          {mem("relu_square.bwd", KernelClass::Elementwise, 2 * In * e, In * e)}));
  Module down = linear(p + ".mlp.c_proj", d.I, d.h, d, 0);
  down.backward.insert(down.backward.begin() + 1, mem("relu_square.recompute", KernelClass::Elementwise, In * e, In * e));
  down.forward.push_back(mem("residual_add", KernelClass::Elementwise, n * (kF32 + e), n * kF32));
  l.modules.push_back(std::move(down));
  return l;
}

// wte(idx): fp32 rows (the embedding is outside autocast's list). Backward under Inductor: the
// fp32 gradient zero-filled and the rows scatter-added (the tied lm_head's gradient is added to
// it in the head).
Layer embedding(const ModelDims& md, const Dims& d) {
  const std::int64_t n = d.T * d.h, table = md.vocab * d.h;
  Layer embed;
  embed.name = "embed";
  embed.kind = LayerKind::Embedding;
  Module wte;
  wte.name = "embed.wte";
  wte.params.push_back(Param{"embed.wte.weight", table, md.vocab});
  wte.forward.push_back(mem("embedding", KernelClass::Embedding, d.T * 8 + n * kF32, n * kF32));
  wte.backward.push_back(param_grad(mem("embedding.bwd.zero", KernelClass::Elementwise, 0, table * kF32)));
  wte.backward.push_back(param_grad(mem("embedding.bwd.scatter_add", KernelClass::Embedding, n * kF32 + d.T * 8, n * kF32)));
  embed.modules.push_back(std::move(wte));
  embed.saved_activations = Bytes{saved_of(embed)};
  return embed;
}

Layer final_norm(const Dims& d) {
  const std::int64_t n = d.T * d.h;
  Layer fnorm;
  fnorm.name = "norm";
  fnorm.kind = LayerKind::Norm;
  fnorm.modules.push_back(ops("norm", {mem("rms_norm", KernelClass::Norm, n * kF32, n * d.e + d.T * kF32, n * kF32 + d.T * kF32)},
                              {mem("rms_norm.bwd", KernelClass::Norm, n * d.e + n * kF32 + d.T * kF32, n * kF32)}));
  fnorm.saved_activations = Bytes{saved_of(fnorm)};
  return fnorm;
}

// The head's lm_head and loss modules; backward holds the logits' gradient (`logits_grad` bytes)
// while it runs.
void finish_head(Layer& out, Module lm, Module loss, std::int64_t logits_grad) {
  out.recompute_activations = Bytes{logits_grad};
  out.modules.push_back(std::move(lm));
  out.modules.push_back(std::move(loss));
  out.saved_activations = Bytes{saved_of(out)};
}

// lm_head (the embedding's weight, tied) and `F.cross_entropy(logits.float(), targets)` as
// Inductor compiles them: the bf16 logits, saved; one reduction kernel for the log-sum-exp and
// the target's logit per row, one for the mean; backward one kernel writing the bf16 logits'
// gradient (softmax minus the one-hot, the fp32 upcast and its cast back fused), the GEMMs, the
// input recomputed for the weight gradient, and the tied weight's gradient added to the
// embedding's.
Layer head(Workload& w, const ModelDims& md, const Dims& d) {
  const std::int64_t T = d.T, TV = T * d.V, e = d.e, table = md.vocab * d.h;
  Layer out;
  out.name = "head";
  out.kind = LayerKind::Head;
  Module lm = linear("head.lm_head", d.h, d.V, d, TV * e);  // saves the logits (the loss's input)
  lm.params.clear();
  lm.backward.insert(lm.backward.begin() + 1, mem("rms_norm.recompute", KernelClass::Elementwise, T * d.h * kF32 + T * kF32, T * d.h * e));
  lm.backward.push_back(param_grad(mem("tied_weight.grad_add", KernelClass::Elementwise, 2 * table * kF32, table * kF32)));
  Module loss = ops("head.loss",
                    {mem("cross_entropy", KernelClass::Reduction, TV * e + T * 8, T * 2 * kF32, T * kF32),
                     mem("loss.mean", KernelClass::Reduction, T * kF32, kF32)},
                    {mem("cross_entropy.bwd", KernelClass::Elementwise, TV * e + T * (8 + kF32), TV * e)});
  finish_head(out, std::move(lm), std::move(loss), TV * e);
  w.loss_dtype = Dtype::FP32;
  return out;
}

}  // namespace nanogpt

// ---- modded-nanogpt of 2025 (family nanogpt-2025, implementation modded_nanogpt) -------------
//
// KellerJordan/modded-nanogpt's GPT as its records of October-December 2025 run it
// (records/track_1_short/2025-10-31_AdamSyncGradientHook: the script is in each log, l.742-1042;
// the repository's trace data/traces/modded-nanogpt is of that record). One packed sequence per
// rank (`assert B == 1`: micro_batch 1, seq_len the rank's tokens, 32,768 in the record) through:
//  - embed and three value embeddings (nn.Embedding, bf16: `m.bfloat16()` for every Embedding and
//    Linear), a smear gate (CastedLinear(12, 1): x[1:] += lambda sigmoid(gate(x[1:, :12])) x[:-1]),
//    x = x0 = norm(x);
//  - blocks 1 to 11 (block 0 has neither attention nor MLP and the loop skips it): x = lambdas[0] x
//    + lambdas[1] x0 (plus a gated U-net skip in blocks 6-10), attention in every block but 0 and
//    7, an MLP in every block but 0. Attention: one GEMM for q, k, v from qkvo_w (an fp32
//    nn.Parameter of [h, 4h], cast to bf16 at each use), F.rms_norm of q and k, rotary, v mixed
//    with a value embedding in blocks 1, 2, 9, 10, 11, FlashAttention-3's varlen kernel with a
//    sliding window (window_size=(bm_size, 0): `long` in blocks 4 and 11, `short` elsewhere), a
//    sigmoid gate per head (CastedLinear(12, heads)), the output projection. MLP: c_fc and c_proj
//    fp32 [h, 4h] parameters, relu(x).square();
//  - x -= backout_lambda * x_backout (block 8's output), norm, the lm_head in FP8
//    (torch.ops.nanogpt.mm: x and W quantized to e4m3 and torch._scaled_mm; backward the
//    gradient quantized to e5m2 and two _scaled_mm), 30 sigmoid(logits / 7.5), cross entropy
//    (reduction "sum") in bf16.
// `torch.compile(model, dynamic=False, fullgraph=True)`: one graph, every memory-bound run one
// Inductor kernel. The kernels below are those of ProfilerStep#13 of the record's trace, in its
// order, with what each reads and writes by the tensors its fused ops touch (its names:
// triton_per_fused__fused_rms_norm__unsafe_view_add_mul_select_..., ...). The windows are the
// schedule's at the step (workload.window_blocks: get_ws, `ws_long` blocks of 128 tokens, the
// short window half of it, rounded down).
namespace nanogpt2025 {

using nanogpt::kF32;
constexpr std::int64_t kFp8 = 1, kGateInputs = 12, kBlockTokens = 128;

bool has_attention(int i) { return i != 0 && i != 7; }
bool has_value_embedding(int i) { return i == 1 || i == 2 || i == 9 || i == 10 || i == 11; }
bool long_window(int i) { return i == 4 || i == 11; }
bool has_skip(int i) { return i >= 6 && i < 11; }  // `if i >= n and i < 11` with n = 6

// An fp32 [in, out] matrix used as `w.type_as(x)` (a cast kernel each forward) by a bf16 GEMM
// (T, out, in); backward the input gradient, the weight gradient (cuBLASLt's split-K with an fp32
// reduction) and its cast to the fp32 parameter's dtype.
Module casted_linear(const std::string& name, const std::string& param, std::int64_t in, std::int64_t out, const Dims& d,
                     std::int64_t saved_input, std::int64_t param_numel) {
  Module m = stepsim::linear(name, in, out, false, d, saved_input);
  m.params.clear();
  if (!param.empty()) m.params.push_back(Param{param, param_numel, in});
  const std::int64_t p = in * out;
  m.forward.insert(m.forward.begin(), mem("weight.to_bf16", KernelClass::Elementwise, p * kF32, p * d.e));
  m.backward.push_back(param_grad(mem("wgrad.to_fp32", KernelClass::Elementwise, p * d.e, p * kF32)));
  return m;
}

// A CastedLinear(12, out) of bf16 weight over x[..., :12]: cuBLAS's small GEMM; backward its two
// small GEMMs.
Module gate(const std::string& name, std::int64_t out, const Dims& d) {
  Module m;
  m.name = name;
  m.params.push_back(Param{name + ".weight", kGateInputs * out, out});
  m.forward.push_back(gemm("gate", d.T, out, kGateInputs, 1, d.dt, Bytes{d.T * kGateInputs * d.e}));
  m.backward.push_back(gemm("gate.dgrad", d.T, kGateInputs, out, 1, d.dt));
  m.backward.push_back(param_grad(gemm("gate.wgrad", kGateInputs, out, d.T, 1, d.dt)));
  return m;
}

// FlashAttention-3's varlen kernel over the packed sequence with window (w, 0): a tile of 128
// queries reads the w + 128 keys its rows' windows span (the tiles at the window's edges masked,
// computed whole; documents shorter than that, and each document's first keys, read fewer: not
// counted), so it computes a non-causal attention over spans of w + 128 keys, at the rate the
// causal kernel reaches at a mean of that many keys per query (a causal sequence twice as long).
// The forward launches prepare_varlen_num_blocks first; backward preprocess (dot(dO, O)), the
// main loop and the dq conversion.
Module windowed_attention(const std::string& name, const Dims& d, std::int64_t window) {
  Module m;
  m.name = name;
  const std::int64_t n = d.T * d.h, e = d.e, lse = d.H * d.T * kF32;
  const std::int64_t span = std::min(window + kBlockTokens, d.T), spans = std::max<std::int64_t>(1, d.T / span);
  Op f = mem("flash_attn_varlen", KernelClass::Attention, 3 * n * e, n * e + lse, 4 * n * e + lse, 2);
  Op b = mem("flash_attn_varlen.bwd", KernelClass::Attention, 5 * n * e + lse, 3 * n * e + n * kF32, 0, 3);
  f.work.attention = AttentionWork{fused_attention_flops(spans, span, d.h, false, false), AttentionKernel::Flash3, false, 2 * span, d.d};
  b.work.attention = AttentionWork{fused_attention_flops(spans, span, d.h, true, false), AttentionKernel::Flash3, true, 2 * span, d.d};
  m.forward.push_back(f);
  m.backward.push_back(b);
  return m;
}

Layer block(int i, const Dims& d, std::int64_t short_window, std::int64_t long_window_tokens) {
  const std::int64_t n = d.T * d.h, In = d.T * d.I, e = d.e, rows = d.T;
  const std::string p = fmt::format("blocks.{}", i);
  Layer l;
  l.name = p;
  l.kind = LayerKind::Block;
  // x = lambdas[0] x + lambdas[1] x0 (+ sigmoid(skip_weight) skip), the previous branch's
  // residual add and norm(x): reads the stream, x0, the branch output (and the skip), writes the
  // stream and its norm; backward one kernel back through them.
  const std::int64_t in_reads = (3 + (has_skip(i) ? 1 : 0)) * n * e;
  l.modules.push_back(nanogpt::ops(p + ".norm_in", {mem("lambdas_add_rms_norm", KernelClass::Norm, in_reads, 2 * n * e + rows * kF32, n * e + rows * kF32)},
                                   {mem("lambdas_add_rms_norm.bwd", KernelClass::Norm, 3 * n * e + rows * kF32, (2 + (has_skip(i) ? 1 : 0)) * n * e)}));
  const std::int64_t P = d.h * 4 * d.h;  // qkvo_w, c_fc, c_proj: [h, 4h] each
  if (has_attention(i)) {
    const std::string a = p + ".attn";
    l.modules.push_back(casted_linear(a + ".qkv", a + ".qkvo_w", d.h, 3 * d.h, d, 0, P));
    // F.rms_norm of q and k over the head, rotary: one kernel; backward with the norms' backward.
    const std::int64_t qk = 2 * n;
    l.modules.push_back(nanogpt::ops(a + ".qk_norm_rotary", {mem("qk_norm_rotary", KernelClass::Norm, qk * e, qk * e, qk * e)},
                                     {mem("qk_norm_rotary.bwd", KernelClass::Norm, 2 * qk * e, qk * e)}));
    // v = sa_lambdas[0] v (+ sa_lambdas[1] ve): backward the gradients of v and ve and the two
    // lambdas' sums.
    const std::int64_t ve = has_value_embedding(i) ? n : 0;
    l.modules.push_back(nanogpt::ops(a + ".value_mix", {mem("value_mix", KernelClass::Elementwise, (n + ve) * e + (ve > 0 ? rows * 8 : 0), n * e)},
                                     {mem("value_mix.bwd", KernelClass::Elementwise, (2 * n + ve) * e, (n + ve) * e)}));
    l.modules.push_back(windowed_attention(a + ".flash_attn", d, long_window(i) ? long_window_tokens : short_window));
    Module g = gate(a + ".attn_gate", d.H, d);
    g.forward.push_back(mem("y_mul_sigmoid", KernelClass::Elementwise, n * e + rows * d.H * e, n * e, rows * d.H * e));
    g.backward.insert(g.backward.begin(), mem("y_mul_sigmoid.bwd", KernelClass::Elementwise, 2 * n * e + rows * d.H * e, n * e + rows * d.H * e));
    l.modules.push_back(std::move(g));
    l.modules.push_back(casted_linear(a + ".o", "", d.h, d.h, d, n * e, 0));  // qkvo_w's fourth quarter
    // the residual add and the MLP's norm: one kernel
    l.modules.push_back(nanogpt::ops(p + ".norm_mlp", {mem("add_rms_norm", KernelClass::Norm, 2 * n * e, 2 * n * e + rows * kF32, n * e + rows * kF32)},
                                     {mem("add_rms_norm.bwd", KernelClass::Norm, 3 * n * e + rows * kF32, n * e)}));
  }
  const std::string m = p + ".mlp";
  l.modules.push_back(casted_linear(m + ".c_fc", m + ".c_fc", d.h, d.I, d, 0, P));
  l.modules.push_back(nanogpt::ops(m + ".relu_square", {mem("relu_square", KernelClass::Elementwise, In * e, In * e, In * e)},
                                   {mem("relu_square.bwd", KernelClass::Elementwise, 2 * In * e, In * e)}));
  l.modules.push_back(casted_linear(m + ".c_proj", m + ".c_proj", d.I, d.h, d, In * e, P));
  return l;
}

// embed (a generated kernel; the value embeddings' rows are read by the blocks' value_mix
// kernels, into which Inductor fuses their lookups), the smear gate, x0 = norm(x). Backward per
// table: Inductor's embedding_dense_backward as an fp32 zero fill, the scatter-add of the rows'
// gradients and the cast to the bf16 parameter's gradient.
Layer embedding(const ModelDims& md, const Dims& d) {
  const std::int64_t n = d.T * d.h, table = md.vocab * d.h, e = d.e;
  Layer embed;
  embed.name = "embed";
  embed.kind = LayerKind::Embedding;
  Module tables;
  tables.name = "embed.tables";
  tables.params.push_back(Param{"embed.weight", table, md.vocab});
  for (int k = 0; k < 3; ++k) tables.params.push_back(Param{fmt::format("value_embeds.{}.weight", k), table, md.vocab});
  tables.forward.push_back(mem("embedding", KernelClass::Embedding, d.T * 8 + n * e, n * e));
  for (int k = 0; k < 4; ++k) {
    tables.backward.push_back(param_grad(mem("embedding_dense_backward.zero", KernelClass::Elementwise, 0, table * kF32)));
    tables.backward.push_back(param_grad(mem("embedding_dense_backward.scatter_add", KernelClass::Embedding, n * e + d.T * 8, n * kF32)));
    tables.backward.push_back(param_grad(mem("embedding_dense_backward.to_bf16", KernelClass::Elementwise, table * kF32, table * e)));
  }
  embed.modules.push_back(std::move(tables));
  Module smear = gate("smear_gate", 1, d);
  // 12 skip weights, 2 x 12 lambdas, 2 x 12 sa_lambdas, smear, backout, padded to a multiple of
  // the world size (64 from 2 to 64 GPUs)
  smear.params.push_back(Param{"scalars", 64, 64});
  smear.forward.push_back(mem("smear_rms_norm", KernelClass::Norm, n * e + d.T * e, n * e + d.T * kF32, n * e + d.T * kF32));
  smear.backward.insert(smear.backward.begin(), mem("smear_rms_norm.bwd", KernelClass::Norm, 3 * n * e, n * e));
  embed.modules.push_back(std::move(smear));
  embed.saved_activations = Bytes{saved_of(embed)};
  return embed;
}

// x -= backout_lambda x_backout, norm; the FP8 lm_head (torch.ops.nanogpt.mm: x / x_s and W / w_s
// cast to e4m3, `_scaled_mm` to bf16 logits; backward the logits' gradient cast to e5m2 with its
// transposed copy, then grad_x = g W and grad_W = x^T g as `_scaled_mm`s); 30 sigmoid(logits /
// 7.5) and cross entropy: one looped reduction writing what backward reads (the softcapped
// logits), one backward kernel writing the logits' gradient.
Layer head(Workload& w, const ModelDims& md, const Dims& d) {
  const std::int64_t T = d.T, n = T * d.h, TV = T * d.V, e = d.e, table = md.vocab * d.h;
  Layer out;
  out.name = "head";
  out.kind = LayerKind::Head;
  Module lm;
  lm.name = "lm_head";
  lm.params.push_back(Param{"lm_head.weight", table, md.vocab});
  lm.forward = {mem("backout_rms_norm", KernelClass::Norm, 3 * n * e, n * e + T * kF32, n * e + T * kF32),
                mem("x.to_e4m3", KernelClass::Elementwise, n * e, n * kFp8, n * kFp8),
                mem("w.to_e4m3", KernelClass::Elementwise, table * e, table * kFp8, table * kFp8),
                gemm("scaled_mm", T, d.V, d.h, 1, Dtype::FP8, {}, GemmLayout::TN)};
  lm.backward = {mem("grad.to_e5m2", KernelClass::Elementwise, TV * e, 2 * TV * kFp8),
                 mem("w.t_e4m3", KernelClass::Elementwise, table * kFp8, table * kFp8),
                 gemm("scaled_mm.dgrad", T, d.h, d.V, 1, Dtype::FP8, {}, GemmLayout::TN),
                 mem("x.t_e4m3", KernelClass::Elementwise, n * kFp8, n * kFp8),
                 param_grad(gemm("scaled_mm.wgrad", d.V, d.h, T, 1, Dtype::FP8, {}, GemmLayout::TN)),
                 mem("grad_x.to_bf16", KernelClass::Elementwise, n * kF32, n * e),
                 mem("backout_rms_norm.bwd", KernelClass::Norm, 3 * n * e, 2 * n * e)};
  Module loss = nanogpt::ops("head.loss",
                             {mem("softcap_cross_entropy", KernelClass::Reduction, TV * e + T * 8, TV * e + T * 2 * kF32, TV * e + T * kF32),
                              mem("loss.sum", KernelClass::Reduction, T * kF32, kF32)},
                             {mem("softcap_cross_entropy.bwd", KernelClass::Reduction, TV * e + T * (8 + kF32), TV * e)});
  nanogpt::finish_head(out, std::move(lm), std::move(loss), TV * e);
  w.loss_dtype = Dtype::BF16;
  return out;
}

}  // namespace nanogpt2025

}  // namespace

Workload build_transformer(const std::string& name, const ModelDims& md, std::int64_t b, std::int64_t s, Dtype dt,
                           Checkpointing ckpt) {
  WorkloadOptions o = default_options(md.family);
  o.checkpointing = ckpt;
  return build_transformer(name, md, b, s, dt, o);
}

Workload build_transformer(const std::string& name, const ModelDims& md, std::int64_t b, std::int64_t s, Dtype dt,
                           const WorkloadOptions& given, Workload* recycled) {
  // The options as they apply, resolved once: what the layers are built from and what reports show.
  WorkloadOptions o = given;
  o.loop = given.training_loop();
  o.loop_keeps_output = loop_keeps_output(given);
  o.checkpoint_early_stop = given.compile || checkpoint_stops_early(given);
  Workload w;
  w.name = name;
  w.dtype = dt;
  w.micro_batch = b;
  w.seq_len = s;
  w.options = o;
  w.hidden = md.hidden;
  const Dims d = dims_of(md, b, s, dt);
  // modded-nanogpt's blocks are built one by one (nanogpt::block): nothing to take names into.
  std::optional<Recycling> recycling;
  if (recycled && o.impl != Implementation::ModdedNanogpt) recycling.emplace(Recycling{recycled});
  if (o.impl == Implementation::ModdedNanogpt && md.family == "nanogpt-2025") {
    const std::int64_t long_window = o.window_blocks * nanogpt2025::kBlockTokens;
    const std::int64_t short_window = std::max<std::int64_t>(1, o.window_blocks / 2) * nanogpt2025::kBlockTokens;
    w.layers.push_back(nanogpt2025::embedding(md, d));
    for (int i = 1; i < md.layers; ++i) w.layers.push_back(nanogpt2025::block(i, d, short_window, long_window));
    w.layers.push_back(nanogpt2025::head(w, md, d));
  } else if (o.impl == Implementation::ModdedNanogpt) {
    w.layers.push_back(nanogpt::embedding(md, d));
    for (int i = 0; i < md.layers; ++i) w.layers.push_back(nanogpt::block(i, d, o));
    w.layers.push_back(nanogpt::final_norm(d));
    w.layers.push_back(nanogpt::head(w, md, d));
  }
  if (o.impl == Implementation::ModdedNanogpt) {
    // One compiled graph: its backward is one CompiledFunctionBackward node; every memory-bound
    // kernel is Inductor's.
    for (auto& l : w.layers) {
      l.autograd_nodes = l.kind == LayerKind::Head ? 1 : 0;
      for (auto& m : l.modules)
        for (auto* ops : {&m.forward, &m.backward})
          for (Op& op : *ops) op.work.generated = is_memory_bound(op.cls);
    }
  } else {
    w.layers.push_back(embedding_layer(md, d, o));
    add_blocks(w, md, d, o, recycling ? &*recycling : nullptr);
    w.layers.push_back(final_norm_layer(md, d, o));
    w.layers.push_back(head_layer(w, md, d, o));
  }
  const HostDispatch fwd_dispatch = o.compile ? HostDispatch::Launch : HostDispatch::Eager;
  const HostDispatch bwd_dispatch = o.compile ? HostDispatch::Launch : HostDispatch::Autograd;
  for (auto& l : w.layers) {
    l.forward_dispatch = fwd_dispatch;
    l.backward_dispatch = bwd_dispatch;
    saved_tensors_per_op(l);
  }
  // The recycled workload's launch names where every layer's are the ones name_launches would
  // form: the blocks past the first were compared as they were made; the others are compared here.
  bool adopt = recycling && recycling->launch_names_same && recycling->old->layers.size() == w.layers.size();
  bool first_block = true;
  for (std::size_t k = 0; k < w.layers.size() && adopt; ++k) {
    const bool made_here = w.layers[k].kind != LayerKind::Block || first_block;
    if (w.layers[k].kind == LayerKind::Block) first_block = false;
    if (made_here) adopt = recycling->same_launch_inputs(w.layers[k], recycling->old->layers[k]);
  }
  if (!adopt || !adopt_launch_names(w, *recycling->old)) name_launches(w);
  return w;
}

Workload build_toy(const std::vector<ToyLayerSpec>& specs, Dtype dtype) {
  Workload w;
  w.name = "toy";
  w.dtype = dtype;
  w.toy = true;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    Layer l;
    l.name = fmt::format("layer.{}", i);
    l.kind = LayerKind::Block;
    Module m;
    m.name = l.name;
    if (specs[i].params > 0) m.params.push_back(Param{l.name + ".weight", specs[i].params, specs[i].params});
    Op f;
    f.name = "forward";
    f.cls = KernelClass::Compute;
    f.work.fixed = specs[i].forward;
    Op b = f;
    b.name = "backward";
    b.work.fixed = specs[i].backward;
    m.forward.push_back(f);
    m.backward.push_back(b);
    l.modules.push_back(m);
    l.saved_activations = specs[i].activations;
    l.forward_dispatch = HostDispatch::Launch;
    l.backward_dispatch = HostDispatch::Launch;
    w.layers.push_back(l);
  }
  name_launches(w);
  return w;
}

}  // namespace stepsim
