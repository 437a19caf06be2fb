#include "sim/analysis/throughput.hpp"

namespace stepsim {

namespace {

std::int64_t blocks(const Workload& w) {
  std::int64_t n = 0;
  for (const auto& l : w.layers) n += l.kind == LayerKind::Block;
  return n;
}

// Attention FLOPs per token, forward only: QK^T and PV, 2 x 2 x hidden x seq per layer.
double attention_forward_per_token(const Workload& w) {
  return 4.0 * static_cast<double>(blocks(w)) * static_cast<double>(w.hidden) * static_cast<double>(w.seq_len);
}

}  // namespace

double model_flops_per_token(const Workload& w) {
  if (w.toy || w.hidden == 0) return 0;
  if (w.options && w.options->window_blocks > 0) {
    // modded-nanogpt 2025 (family nanogpt-2025): its attention reads a window of keys per query,
    // not the sequence, and its embedding layer is four lookup tables (embed and three value
    // embeddings, untied from the lm_head), no matmul: the parameters that multiply, and the
    // attention as the model runs it (its forward ops' FLOPs, QK^T and PV over the window).
    double matmul = static_cast<double>(w.numel()), attention = 0;
    for (const auto& l : w.layers) {
      if (l.kind == LayerKind::Embedding) matmul -= static_cast<double>(l.numel());
      for (const auto& m : l.modules)
        for (const auto& op : m.forward) attention += op.work.attention.flops.count;
    }
    return 6.0 * matmul + 3.0 * attention / static_cast<double>(w.tokens());
  }
  return 6.0 * static_cast<double>(w.numel()) + 3.0 * attention_forward_per_token(w);
}

Throughput throughput(const Experiment& e, Time step_time) {
  Throughput t;
  const Workload& w = *e.workload;
  const double world = e.cluster.world_size();
  t.tokens_per_step = static_cast<double>(w.tokens()) * e.training.grad_accum * world;
  t.samples_per_step = static_cast<double>(w.micro_batch) * e.training.grad_accum * world;
  if (step_time.ns <= 0) return t;
  const double s = step_time.seconds();
  t.tokens_per_s = t.tokens_per_step / s;
  t.tokens_per_s_per_gpu = t.tokens_per_s / world;
  t.samples_per_s = t.tokens_per_s / static_cast<double>(w.seq_len);
  auto peak = e.cluster.profile->compute.peak.find(w.dtype);
  const double model = model_flops_per_token(w);
  if (model <= 0 || peak == e.cluster.profile->compute.peak.end() || peak->second.flops_per_s <= 0) return t;
  double hardware = model;
  if (w.checkpointing() == Checkpointing::Full) {
    hardware += model / 3;
  } else if (w.checkpointing() == Checkpointing::Selective) {
    hardware += attention_forward_per_token(w);
  } else if (w.checkpointing() != Checkpointing::None) {
    // op_sac, every_k: the FLOPs of the ops the workload re-runs (GEMMs and attention).
    double recomputed = 0;
    for (const auto& l : w.layers)
      for (const auto& op : l.recompute) {
        for (const auto& g : op.work.gemms) recomputed += g.flops().count;
        recomputed += op.work.attention.flops.count;
      }
    hardware += recomputed / static_cast<double>(w.tokens());
  }
  t.mfu_pct = 100.0 * model * t.tokens_per_s_per_gpu / peak->second.flops_per_s;
  t.hfu_pct = 100.0 * hardware * t.tokens_per_s_per_gpu / peak->second.flops_per_s;
  return t;
}

}  // namespace stepsim
