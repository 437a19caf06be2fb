// Transformer layers from dimensions: parameters, GEMM shapes of forward and backward,
// memory-bound traffic, attention FLOPs, saved activations per checkpointing policy.
#include "sim/workload/workload.hpp"

#include <fmt/format.h>

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
  for (const auto& m : modules) w += m.forward;
  return w;
}

KernelWork Layer::backward() const {
  KernelWork w = recompute;
  for (auto it = modules.rbegin(); it != modules.rend(); ++it) w += it->backward;
  return w;
}

std::vector<const Param*> Layer::params() const {
  std::vector<const Param*> out;
  for (const auto& m : modules)
    for (const auto& p : m.params) out.push_back(&p);
  return out;
}

std::int64_t Workload::numel() const {
  std::int64_t n = 0;
  for (const auto& l : layers) n += l.numel();
  return n;
}

Flops Workload::model_flops() const {
  Flops f;
  for (const auto& l : layers)
    for (const auto& m : l.modules) {
      for (const auto& g : m.forward.gemms) f += g.flops();
      for (const auto& g : m.backward.gemms) f += g.flops();
      f += m.forward.attention_flops;
      f += m.backward.attention_flops;
    }
  return f;
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
  }
  return "none";
}

namespace {

// A linear layer y[T, out] = x[T, in] W^T: forward GEMM (m=T, n=out, k=in); backward
// input grad (m=T, n=in, k=out) and weight grad (m=in, n=out, k=T), PyTorch's three GEMMs.
Module linear(const std::string& name, std::int64_t in, std::int64_t out, bool bias, std::int64_t tokens, Dtype dt) {
  Module m;
  m.name = name;
  m.params.push_back(Param{name + ".weight", in * out, out});
  if (bias) m.params.push_back(Param{name + ".bias", out, out});
  m.forward.gemms.push_back(GemmShape{tokens, out, in, 1, dt});
  m.backward.gemms.push_back(GemmShape{tokens, in, out, 1, dt});
  m.backward.gemms.push_back(GemmShape{in, out, tokens, 1, dt});
  if (bias) m.backward.memory_bytes += Bytes{tokens * out * dtype_bytes(dt)};  // bias grad reduction
  return m;
}

// A norm over `hidden` (RMSNorm: weight; LayerNorm: weight + bias). Forward reads and writes
// the activations once; backward about twice.
Module norm(const std::string& name, std::int64_t hidden, bool bias, std::int64_t tokens, Dtype dt) {
  Module m;
  m.name = name;
  m.params.push_back(Param{name + ".weight", hidden, hidden});
  if (bias) m.params.push_back(Param{name + ".bias", hidden, hidden});
  m.forward.memory_bytes = Bytes{2 * tokens * hidden * dtype_bytes(dt)};
  m.backward.memory_bytes = Bytes{4 * tokens * hidden * dtype_bytes(dt)};
  return m;
}

Layer block(int index, const ModelDims& d, std::int64_t b, std::int64_t s, Dtype dt, Checkpointing ckpt) {
  const std::int64_t T = b * s, h = d.hidden, head_dim = d.hidden / d.heads, kv = d.kv_heads * head_dim, I = d.ffn;
  const std::int64_t e = dtype_bytes(dt);
  const bool llama = d.family == "llama";
  const std::string p = fmt::format("block.{}", index);
  Layer l;
  l.name = p;
  l.kind = LayerKind::Block;
  l.modules.push_back(norm(p + ".attn_norm", h, !llama, T, dt));
  l.modules.push_back(linear(p + ".attn.q_proj", h, h, !llama, T, dt));
  l.modules.push_back(linear(p + ".attn.k_proj", h, kv, !llama, T, dt));
  l.modules.push_back(linear(p + ".attn.v_proj", h, kv, !llama, T, dt));
  // Causal flash attention: QK^T and PV are 2 * 2*b*s*s*h FLOPs, halved by the mask; backward
  // does 5 such products against forward's 2 (FlashAttention-2 paper, section 3.1).
  Module attn;
  attn.name = p + ".attn.core";
  attn.forward.attention_flops = Flops{2.0 * b * static_cast<double>(s) * s * h};
  attn.backward.attention_flops = Flops{5.0 * b * static_cast<double>(s) * s * h};
  attn.forward.memory_bytes = Bytes{T * (2 * h + 2 * kv) * e};  // rotary on q, k (llama) / softmax io
  attn.backward.memory_bytes = Bytes{2 * T * (2 * h + 2 * kv) * e};
  l.modules.push_back(attn);
  l.modules.push_back(linear(p + ".attn.o_proj", h, h, !llama, T, dt));
  l.modules.push_back(norm(p + ".mlp_norm", h, !llama, T, dt));
  if (llama) {
    l.modules.push_back(linear(p + ".mlp.gate_proj", h, I, false, T, dt));
    l.modules.push_back(linear(p + ".mlp.up_proj", h, I, false, T, dt));
    Module act;
    act.name = p + ".mlp.act";
    act.forward.memory_bytes = Bytes{3 * T * I * e};   // silu(gate) * up: read 2, write 1
    act.backward.memory_bytes = Bytes{5 * T * I * e};
    l.modules.push_back(act);
    l.modules.push_back(linear(p + ".mlp.down_proj", I, h, false, T, dt));
  } else {
    l.modules.push_back(linear(p + ".mlp.fc1", h, I, true, T, dt));
    Module act;
    act.name = p + ".mlp.act";
    act.forward.memory_bytes = Bytes{2 * T * I * e};
    act.backward.memory_bytes = Bytes{3 * T * I * e};
    l.modules.push_back(act);
    l.modules.push_back(linear(p + ".mlp.fc2", I, h, true, T, dt));
  }
  // Residual adds: two per block, read 2 write 1.
  l.modules.front().forward.memory_bytes += Bytes{6 * T * h * e};
  l.modules.front().backward.memory_bytes += Bytes{4 * T * h * e};

  // Saved activations (bf16 element size e) per token, no checkpointing: norm inputs (2h),
  // q/k/v inputs (h), q, k, v (h + 2kv), attention output = o_proj input (h), MLP input (h),
  // MLP intermediates (llama: gate, up, act product = 3I; gpt/opt: fc1 out, act = 2I), plus
  // the flash-attention log-sum-exp (negligible). Korthikanti et al. 2022 derive the same
  // terms for GPT (34 s b h with dropout masks; no dropout here).
  std::int64_t none_per_token = 2 * h + h + (h + 2 * kv) + h + h + (llama ? 3 * I : 2 * I);
  KernelWork fwd = l.forward();
  switch (ckpt) {
    case Checkpointing::None:
      l.saved_activations = Bytes{T * none_per_token * e};
      break;
    case Checkpointing::Selective: {
      // Selective (Korthikanti et al.): keep GEMM inputs/outputs, recompute the attention core
      // and the elementwise ops in backward.
      std::int64_t kept = 2 * h + (h + 2 * kv) + h + (llama ? 2 * I : I);
      l.saved_activations = Bytes{T * kept * e};
      KernelWork re;
      re.attention_flops = l.modules[4].forward.attention_flops;
      re.memory_bytes = fwd.memory_bytes;
      l.recompute = re;
      l.recompute_activations = Bytes{T * (none_per_token - kept) * e};
      break;
    }
    case Checkpointing::Full:
      // Only the block input survives forward; backward re-runs the whole forward first.
      l.saved_activations = Bytes{T * h * e};
      l.recompute = fwd;
      l.recompute_activations = Bytes{T * none_per_token * e};
      break;
  }
  return l;
}

}  // namespace

Workload build_transformer(const std::string& name, const ModelDims& d, std::int64_t b, std::int64_t s, Dtype dt,
                           Checkpointing ckpt) {
  Workload w;
  w.name = name;
  w.dtype = dt;
  w.micro_batch = b;
  w.seq_len = s;
  w.checkpointing = ckpt;
  w.hidden = d.hidden;
  const std::int64_t T = b * s, h = d.hidden, e = dtype_bytes(dt);
  const bool llama = d.family == "llama";

  Layer embed;
  embed.name = "embed";
  embed.kind = LayerKind::Embedding;
  Module tok;
  tok.name = "embed.tokens";
  tok.params.push_back(Param{"embed.tokens.weight", d.vocab * h, d.vocab});
  tok.forward.memory_bytes = Bytes{2 * T * h * e};
  // Embedding backward: scatter-add of T rows into a dense vocab x h gradient.
  tok.backward.memory_bytes = Bytes{T * h * e + d.vocab * h * e};
  embed.modules.push_back(tok);
  // MPT's learned position table has max_seq_len rows: the run's sequence length.
  const std::int64_t positions = d.family == "mpt" ? s : d.max_positions;
  if (positions > 0) {
    Module pos;
    pos.name = "embed.positions";
    pos.params.push_back(Param{"embed.positions.weight", positions * h, positions});
    pos.forward.memory_bytes = Bytes{3 * T * h * e};
    pos.backward.memory_bytes = Bytes{2 * T * h * e};
    embed.modules.push_back(pos);
  }
  embed.saved_activations = Bytes{T * 8};  // token ids (int64)
  w.layers.push_back(embed);

  for (int i = 0; i < d.layers; ++i) w.layers.push_back(block(i, d, b, s, dt, ckpt));

  Layer fnorm;
  fnorm.name = "norm";
  fnorm.kind = LayerKind::Norm;
  fnorm.modules.push_back(norm("norm", h, !llama, T, dt));
  fnorm.saved_activations = Bytes{T * h * e};
  w.layers.push_back(fnorm);

  // LM head + cross-entropy. Tied heads (gpt, opt) reuse the embedding weight: compute, no
  // parameters. Logits are upcast to fp32 for the loss: T * vocab * 4 bytes are saved, and
  // the softmax backward reads and writes them.
  Layer head;
  head.name = "head";
  head.kind = LayerKind::Head;
  Module lm = linear("head.lm_head", h, d.vocab, false, T, dt);
  if (d.tied_embeddings) lm.params.clear();
  lm.forward.memory_bytes = Bytes{T * d.vocab * (e + 4 + 4)};
  lm.backward.memory_bytes = Bytes{T * d.vocab * (4 + 4 + e)};
  head.modules.push_back(lm);
  head.saved_activations = Bytes{T * h * e + T * d.vocab * 4};
  w.layers.push_back(head);
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
    m.forward.fixed = specs[i].forward;
    m.backward.fixed = specs[i].backward;
    l.modules.push_back(m);
    l.saved_activations = specs[i].activations;
    w.layers.push_back(l);
  }
  return w;
}

}  // namespace stepsim
