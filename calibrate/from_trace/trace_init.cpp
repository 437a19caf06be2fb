#include "calibrate/from_trace/trace_init.hpp"

#include <algorithm>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "calibrate/from_trace/trace_fit.hpp"
#include "trace/trace_index.hpp"
#include "sim/core/error.hpp"

namespace stepsim::trace {

namespace {

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// The collectives of the first selected step of `t`, each with its phase and whether compute
// ran beside it.
struct StepCollectives {
  bool ag_forward = false, rs_backward = false, ar_backward = false, ag_after_optimizer = false;
  bool ar_overlaps_compute = false;
  std::string dtype;
};

StepCollectives collectives_of(const KinetoTrace& t, const TraceAnalysis& a) {
  StepCollectives out;
  if (a.steps.empty()) return out;
  const std::int64_t step = a.steps.front().number;
  TraceIndex idx(t);
  std::optional<std::size_t> si;
  for (std::size_t i = 0; i < idx.steps().size(); ++i)
    if (idx.steps()[i]->step_number == step) si = i;
  for (const CollectiveRecord& r : a.collectives) {
    if (r.step != step || !si) continue;
    const GpuOp& op = t.gpu_ops[r.op];
    Phase p = idx.kineto_phase(*si, idx.anchor(op));
    if (out.dtype.empty() && r.bytes.count > 1024) out.dtype = r.dtype;
    const bool big = r.bytes.count > 64 * 1024;  // not the grad-norm / overflow scalars
    if (!big) continue;
    if (r.kind == TraceCollective::AllGather && p == Phase::Forward) out.ag_forward = true;
    if (r.kind == TraceCollective::ReduceScatter && p == Phase::Backward) out.rs_backward = true;
    if (r.kind == TraceCollective::AllGather && p == Phase::Optimizer) out.ag_after_optimizer = true;
    if (r.kind == TraceCollective::AllReduce && p == Phase::Backward) {
      out.ar_backward = true;
      if (r.exposed.ns * 10 < r.duration.ns * 9) out.ar_overlaps_compute = true;
    }
  }
  return out;
}

// The MLP activation, from the elementwise kernels PyTorch launches for it (not from GEMM names:
// cuBLAS kernel names such as "..._ldg8_relu_f2f_..." name an epilogue the kernel supports, not
// one it ran). ReLU: at::relu is clamp_min (launch_clamp_scalar), its backward
// threshold_backward; GELU: GeluCUDAKernelImpl / GeluBackwardCUDAKernelImpl, or fused
// bias-GeLU kernels. Counts are over every kernel of the trace.
struct Activations {
  std::size_t relu = 0, gelu = 0;
};

Activations activation_kernels(const KinetoTrace& t) {
  std::vector<int> kind(t.names.size(), 0);  // 1 relu, 2 gelu, per interned name
  for (std::size_t i = 0; i < t.names.size(); ++i) {
    const std::string n = lower(t.names[i]);
    if (has(n, "gemm")) continue;
    if (has(n, "gelu")) kind[i] = 2;
    else if (has(n, "launch_clamp_scalar") || has(n, "threshold")) kind[i] = 1;
  }
  Activations a;
  for (const GpuOp& op : t.gpu_ops) {
    if (op.kind != GpuOp::Kind::Kernel || op.name < 0 || static_cast<std::size_t>(op.name) >= kind.size()) continue;
    if (kind[static_cast<std::size_t>(op.name)] == 1) ++a.relu;
    if (kind[static_cast<std::size_t>(op.name)] == 2) ++a.gelu;
  }
  return a;
}

template <typename K>
K most_frequent(const std::map<K, std::size_t>& counts) {
  K best{};
  std::size_t n = 0;
  for (const auto& [k, c] : counts)
    if (c > n) {
      best = k;
      n = c;
    }
  return best;
}

// The dimensions a transformer block's GEMMs give (the rules in the header).
struct BlockShapes {
  std::int64_t tokens = 0, hidden = 0;  // T and h
  std::int64_t ffn = 0;                 // the MLP width F, 0 when no MLP pair was found
  std::int64_t vocab = 0;
  std::size_t up_count = 0, down_count = 0;  // (T, F, h) and (T, h, F) GEMMs at F = ffn
};

// Empty when the trace recorded no GEMM shapes.
std::optional<BlockShapes> block_shapes(const TraceFitData& fit) {
  std::map<std::int64_t, std::size_t> m_count;
  for (const auto& g : fit.gemms)
    if (g.shape.batch == 1) m_count[g.shape.m] += g.count;
  if (m_count.empty()) return std::nullopt;
  BlockShapes b;
  const std::int64_t T = b.tokens = most_frequent(m_count);
  std::map<std::int64_t, std::size_t> k_count;
  for (const auto& g : fit.gemms)
    if (g.shape.batch == 1 && g.shape.m == T) k_count[g.shape.k] += g.count;
  const std::int64_t h = b.hidden = most_frequent(k_count);
  // MLP width: the N of (T, F, h) GEMMs that also appear as (T, h, F).
  std::map<std::int64_t, std::size_t> up, down;
  for (const auto& g : fit.gemms) {
    if (g.shape.batch != 1 || g.shape.m != T) continue;
    if (g.shape.k == h && g.shape.n != h) up[g.shape.n] += g.count;
    if (g.shape.n == h && g.shape.k != h) down[g.shape.k] += g.count;
    if (g.shape.k == h) b.vocab = std::max(b.vocab, g.shape.n);
  }
  for (const auto& [f, c] : down)
    if (up.count(f) && c > b.down_count && f != b.vocab) {
      b.ffn = f;
      b.down_count = c;
      b.up_count = up[f];
    }
  return b;
}

struct AttentionDims {
  std::int64_t seq, heads, micro_batch;
};

// Heads, sequence and micro-batch from the batched attention matmuls (eager attention), or
// assumed (flash attention leaves none), with a note either way.
AttentionDims attention_dims(const TraceFitData& fit, const BlockShapes& b, std::vector<std::string>& notes) {
  const std::int64_t T = b.tokens, h = b.hidden;
  std::map<GemmShape, std::size_t> bmm;
  for (const auto& g : fit.gemms)
    if (g.shape.batch > 1 && g.shape.m == g.shape.n && g.shape.k < g.shape.m) bmm[g.shape] += g.count;
  AttentionDims d{T, std::max<std::int64_t>(1, h / 128), 1};
  const GemmShape s = bmm.empty() ? GemmShape{} : most_frequent(bmm);
  if (s.k > 0 && h % s.k == 0 && T % s.m == 0) {
    d.seq = s.m;
    d.heads = h / s.k;
    d.micro_batch = T / d.seq;
    if (s.batch != d.micro_batch * d.heads)
      notes.push_back(fmt::format("attention matmul batch {} is not micro-batch x heads = {}: check heads", s.batch,
                                  d.micro_batch * d.heads));
    notes.push_back(fmt::format("sequence {} and head dim {} from the attention matmuls [{} x {} x {}]: {} heads, micro-batch {}",
                                d.seq, s.k, s.batch, d.seq, s.k, d.heads, d.micro_batch));
  } else {
    notes.push_back(fmt::format("heads, sequence and micro-batch: no attention matmuls in the trace (flash attention); head "
                                "dim 128 ({} heads), micro-batch 1 and sequence {} assumed: set the real ones",
                                d.heads, d.seq));
  }
  return d;
}

// The workload's model object. A two-matrix MLP with ReLU is OPT's (HF OPTDecoderLayer: fc1,
// ReLU, fc2); with GELU (or nothing recognisable) GPT-2's. ReLU wins only when it runs at least
// once per layer and no GELU kernel ran at all.
nlohmann::json model_json(const BlockShapes& b, bool swiglu, std::int64_t layers, const AttentionDims& att,
                          const Activations& act, const std::string& trace_name, std::vector<std::string>& notes) {
  const bool relu = !swiglu && act.gelu == 0 && act.relu >= static_cast<std::size_t>(layers);
  const char* family = swiglu ? "llama" : relu ? "opt" : "gpt";
  nlohmann::json model{{"name", "inferred from " + trace_name}, {"family", family},     {"hidden", b.hidden},
                       {"layers", layers},                      {"heads", att.heads},  {"ffn", b.ffn},
                       {"vocab", std::max<std::int64_t>(1, b.vocab)}};
  if (!swiglu) {
    model["max_positions"] = att.seq;
    model["tied_embeddings"] = true;
    notes.push_back(fmt::format(
        "family {}: {} ({} ReLU and {} GELU kernels in the trace); LayerNorm, biases, learned positions ({} rows "
        "assumed) and tied embeddings assumed, as {} has them; not visible in GEMM shapes",
        family, relu ? "ReLU MLP activation (clamp_min / threshold_backward kernels)" : "GELU MLP activation assumed",
        act.relu, act.gelu, att.seq, relu ? "OPT" : "GPT-2"));
  }
  return model;
}

// The workload of a transformer whose GEMM shapes the trace recorded (the rules in the header),
// or null with a note saying why not.
nlohmann::json infer_transformer(const TraceFitData& fit, const Activations& act, std::size_t steps, const std::string& trace_name,
                                 std::vector<std::string>& notes) {
  auto note = [&](std::string s) { notes.push_back(std::move(s)); };
  const std::optional<BlockShapes> shapes = block_shapes(fit);
  if (!shapes) {
    note("model: the trace records no GEMM shapes (profile with record_shapes=True); the llama3-8b preset stands in");
    return nullptr;
  }
  const BlockShapes& b = *shapes;
  if (b.ffn == 0 || b.down_count < 2 * steps) {
    // No transformer MLP pair among the shapes (a CNN, or too few GEMMs recorded).
    note(fmt::format("model: the GEMM shapes describe no transformer block (no (T, F, hidden) / (T, hidden, F) MLP pair "
                     "at T = {}, hidden = {}); the llama3-8b preset stands in: describe the model yourself",
                     b.tokens, b.hidden));
    return nullptr;
  }
  const bool swiglu = b.up_count >= 2 * b.down_count - b.down_count / 4;
  // Per layer and step: (T, h, F) runs in forward (down-projection) and in backward (the
  // up-projection's input gradient): 2; 3 when the forward is recomputed (checkpointing).
  const std::int64_t per_step = static_cast<std::int64_t>(b.down_count / steps);
  const std::int64_t layers = std::max<std::int64_t>(1, per_step / 2);
  note(fmt::format("tokens per micro-batch T = {} (most frequent GEMM M), hidden = {} (most frequent K at M = T), MLP width {} "
                   "({} MLP), vocabulary {} (widest N at K = hidden)",
                   b.tokens, b.hidden, b.ffn,
                   swiglu ? "SwiGLU: two up-projections per down-projection, Llama family" : "two-matrix", b.vocab));
  note(fmt::format("layers = {}: {} (T, hidden, MLP width) GEMMs per step / 2 (forward + input gradient); if activation "
                   "checkpointing recomputes the forward, the count is 3 per layer: divide by 3 instead",
                   layers, per_step));
  const AttentionDims att = attention_dims(fit, b, notes);
  nlohmann::json model = model_json(b, swiglu, layers, att, act, trace_name, notes);
  return {{"model", model}, {"seq_len", att.seq}, {"micro_batch", att.micro_batch}};
}

// The cluster as far as a trace tells it: world size from distributedInfo (nodes x GPUs per
// node assumed, see the header) and the main device's name and memory.
struct ClusterGuess {
  int world = 1, gpus_per_node = 1;
  std::string device;
  Bytes memory;
};

ClusterGuess guess_cluster(const KinetoTrace& t, std::vector<std::string>& notes) {
  ClusterGuess c;
  c.world = t.world_size > 0 ? t.world_size : 1;
  if (t.world_size <= 0) notes.push_back("world size: the trace has no distributedInfo; 1 rank assumed");
  c.gpus_per_node = c.world <= 8 ? c.world : 8;
  if (c.world % c.gpus_per_node != 0) c.gpus_per_node = 1;
  notes.push_back(fmt::format("nodes x GPUs per node: a trace does not record them; {} x {} assumed",
                              c.world / c.gpus_per_node, c.gpus_per_node));
  for (const auto& d : t.devices)
    if (d.id == t.main_device()) {
      c.device = d.name;
      c.memory = d.memory;
    }
  return c;
}

// The dtype of the GEMM inputs; without GEMM shapes, the collectives' (or bf16), with a note.
std::string guess_dtype(const TraceFitData& fit, const KinetoTrace& t, const TraceAnalysis& a, std::vector<std::string>& notes) {
  std::map<Dtype, std::size_t> dtype_count;
  for (const auto& g : fit.gemms)
    if (g.shape.batch == 1) dtype_count[g.shape.dtype] += g.count;
  std::string dtype = dtype_count.empty() ? "" : to_string(most_frequent(dtype_count));
  if (dtype.empty()) {
    StepCollectives c = collectives_of(t, a);
    dtype = c.dtype == "bf16" || c.dtype == "fp16" ? c.dtype : "bf16";
    notes.push_back("dtype: no GEMM shapes in the trace (record_shapes off); " + dtype + " from the collectives or assumed");
  }
  return dtype;
}

// The framework, from the collectives of one step and when they run (the rules in the header).
nlohmann::json guess_strategy(const KinetoTrace& t, const TraceAnalysis& a, int world, std::vector<std::string>& notes) {
  auto note = [&](std::string s) { notes.push_back(std::move(s)); };
  StepCollectives c = collectives_of(t, a);
  bool fsdp2_kernels = false;
  for (const auto& n : t.names)
    if (has(n, "chunk_cat") || has(n, "split_with_sizes_copy")) fsdp2_kernels = true;
  if (world == 1) {
    note("framework: one rank, no collectives to tell frameworks apart; ddp assumed");
    return {{"framework", "ddp"}};
  }
  if (c.ag_forward && c.rs_backward) {
    note(std::string("framework: all-gathers in forward and reduce-scatters in backward: FSDP (") +
         (fsdp2_kernels ? "FSDP2: its chunk_cat / split_with_sizes_copy kernels are present" : "FSDP1: no FSDP2 copy kernels") +
         "; DeepSpeed ZeRO-3 looks the same in a trace)");
    return {{"framework", fsdp2_kernels ? "fsdp2" : "fsdp1"}, {"wrap", "block"}};
  }
  if (c.ag_after_optimizer) {
    int stage = c.ar_overlaps_compute ? 2 : 1;
    nlohmann::json strategy = {{"framework", "zero"}, {"stage", stage}};
    if (stage == 2) strategy["overlap_comm"] = true;
    note(fmt::format("framework: gradient all-reduces{} and an all-gather of the parameters after the optimizer step: "
                     "DeepSpeed ZeRO-{} (stage 1 and 2 differ in the trace only by that overlap)",
                     c.ar_overlaps_compute ? " overlapping backward" : " after backward", stage));
    if (std::any_of(t.cpu.begin(), t.cpu.end(), [](const CpuSpan& s) { return s.kind == CpuSpan::Kind::MonitorWrite; })) {
      strategy["monitor"] = true;
      note("monitor: the trace's Python stacks show DeepSpeed's monitor writing (deepspeed/monitor/monitor.py write_events)");
    }
    return strategy;
  }
  note(c.ar_backward ? "framework: all-reduces during backward and no all-gather: DDP"
                     : "framework: no recognisable collective pattern; ddp assumed");
  return {{"framework", "ddp"}};
}

}  // namespace

std::string shipped_profile_for(const std::string& device_name, Bytes memory) {
  std::string n = lower(device_name);
  if (has(n, "a800")) return "configs/hardware/a800-sxm-8x.json";
  if (has(n, "a100")) return memory.gib() < 60 ? "configs/hardware/a100-sxm4-40gb-8x.json" : "configs/hardware/a100-sxm-8x.json";
  if (has(n, "h100") || has(n, "h800")) return memory.gib() > 90 ? "configs/hardware/h100-sxm-96gb.json" : "configs/hardware/h100-sxm-8x.json";
  return "";
}

InitResult init_from_traces(const std::vector<KinetoTrace>& traces, const AnalyzeOptions& o, const std::string& profile_ref) {
  if (traces.empty()) throw InputError("init: no trace given");
  const KinetoTrace& t = traces.front();
  InitResult r;
  TraceAnalysis a = analyze_trace(t, o);
  if (a.steps.empty()) throw InputError(t.file + ": no ProfilerStep span in the selected range: nothing to infer a step from");
  const std::size_t steps = a.steps.size();

  const ClusterGuess cluster = guess_cluster(t, r.notes);
  r.base_profile = shipped_profile_for(cluster.device, cluster.memory);
  if (r.base_profile.empty())
    r.notes.push_back("GPU \"" + cluster.device + "\": no shipped profile of this type; the fitted profile uses "
                      "configs/hardware/h100-sxm-8x.json for what the trace does not measure");

  // Model dimensions from the GEMM shapes.
  TraceFitData fit = extract_fit_data(traces, o);
  std::string dtype = guess_dtype(fit, t, a, r.notes);
  const std::string trace_name = std::filesystem::path(t.file).filename().string();
  nlohmann::json workload = infer_transformer(fit, activation_kernels(t), steps, trace_name, r.notes);
  if (workload.is_null()) workload = {{"preset", "llama3-8b"}, {"seq_len", 2048}, {"micro_batch", 1}};
  workload["dtype"] = dtype;

  nlohmann::json strategy = guess_strategy(t, a, cluster.world, r.notes);
  const int nodes = cluster.world / cluster.gpus_per_node;
  r.experiment = {{"name", "inferred from " + trace_name},
                  {"description", fmt::format("stepsim init --from-trace: {} ({}, rank {} of {}), {} step(s)", t.file,
                                              cluster.device.empty() ? "unknown GPU" : cluster.device, t.rank,
                                              cluster.world, steps)},
                  {"workload", workload},
                  {"cluster", {{"profile", profile_ref}, {"nodes", nodes}, {"gpus_per_node", cluster.gpus_per_node}}},
                  {"strategy", strategy},
                  {"training", {{"grad_accum", 1}, {"optimizer", "adamw"}}}};
  r.notes.push_back("training: gradient accumulation 1 and AdamW assumed (a trace step is one optimizer step; set "
                    "grad_accum if several backward passes run per ProfilerStep)");
  r.experiment["notes"] = r.notes;
  return r;
}

}  // namespace stepsim::trace
