#include "calibrate/from_trace/trace_fit.hpp"

#include <algorithm>
#include <cmath>
#include <cctype>
#include <limits>
#include <map>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "sim/hardware/compute_model.hpp"
#include "sim/core/stats.hpp"
#include "trace/idle_attribution.hpp"
#include "trace/trace_index.hpp"

namespace stepsim::trace {

namespace {

bool contains(const std::string& s, const char* what) { return s.find(what) != std::string::npos; }

Time median_of(std::vector<Time> v) {
  std::sort(v.begin(), v.end());
  return v[(v.size() - 1) / 2];  // the lower middle: a measured value
}

bool selected(std::int64_t step, const AnalyzeOptions& o) {
  return (!o.first_step || step >= *o.first_step) && (!o.last_step || step <= *o.last_step);
}

// GEMM shape of an aten op from its Input Dims (record_shapes=True); false if they do not fit.
bool gemm_shape(const std::string& op, const std::vector<std::vector<std::int64_t>>& d, GemmShape& s) {
  auto mat = [&](std::size_t a, std::size_t b) {  // [M,K] x [K,N]
    if (d.size() <= b || d[a].size() != 2 || d[b].size() != 2 || d[a][1] != d[b][0]) return false;
    s.m = d[a][0]; s.k = d[a][1]; s.n = d[b][1]; s.batch = 1;
    return true;
  };
  auto bat = [&](std::size_t a, std::size_t b) {  // [B,M,K] x [B,K,N]
    if (d.size() <= b || d[a].size() != 3 || d[b].size() != 3 || d[a][2] != d[b][1]) return false;
    s.batch = d[a][0]; s.m = d[a][1]; s.k = d[a][2]; s.n = d[b][2];
    return true;
  };
  if (op == "aten::mm") return mat(0, 1);
  if (op == "aten::addmm") return mat(1, 2);
  if (op == "aten::bmm") return bat(0, 1);
  if (op == "aten::baddbmm") return bat(1, 2);
  return false;
}

struct AttentionShape {
  std::int64_t batch = 0, seq = 0, hidden = 0, head_dim = 0;
};

bool attention_backward(const std::string& op) { return op.ends_with("Backward") || op.ends_with("_backward"); }

// The shape of a fused attention call from its Input Dims. flash_attn's autograd functions take
// q as [b, s, H, d] ([b, s, 3, H, d] packed), the varlen ones [T, H, d] ([T, 3, H, d] packed)
// with cu_seqlens [b + 1] (equal lengths assumed: T / b); their backward nodes record only the
// gradient, q's layout, so a varlen backward takes b from the forward of the same [T, H, d]
// (`varlen_batch`). PyTorch's sdpa ops take q (and the gradient) as [b, H, s, d].
std::optional<AttentionShape> attention_shape(const std::string& op, const std::vector<std::vector<std::int64_t>>& d,
                                              std::map<std::vector<std::int64_t>, std::int64_t>& varlen_batch) {
  if (d.empty()) return std::nullopt;
  const auto& q = d.front();
  if (op.starts_with("aten::")) {
    if (q.size() != 4) return std::nullopt;
    return AttentionShape{q[0], q[2], q[1] * q[3], q[3]};
  }
  const bool packed = op.find("QKVPacked") != std::string::npos;
  if (op.find("Varlen") != std::string::npos) {
    if (q.size() != (packed ? 4u : 3u)) return std::nullopt;
    const std::int64_t t = q[0], h = packed ? q[2] * q[3] : q[1] * q[2];
    std::int64_t b = 0;
    if (!attention_backward(op)) {
      auto cu = std::find_if(d.begin() + 1, d.end(), [](const auto& x) { return x.size() == 1; });
      if (cu == d.end() || (*cu)[0] < 2) return std::nullopt;
      b = (*cu)[0] - 1;
      varlen_batch[q] = b;
    } else if (auto it = varlen_batch.find(q); it != varlen_batch.end()) {
      b = it->second;
    }
    if (b <= 0 || t % b != 0) return std::nullopt;
    return AttentionShape{b, t / b, h, q.back()};
  }
  if (q.size() != (packed ? 5u : 4u)) return std::nullopt;
  return AttentionShape{q[0], q[1], packed ? q[3] * q[4] : q[2] * q[3], q.back()};
}

// Is_causal of a FlashAttention-2 kernel from its template arguments: flash_fwd_kernel<
// Kernel_traits, Is_dropout, Is_causal, ...> and flash_bwd_dq_dk_dv_loop*_kernel<Kernel_traits,
// Is_dropout, Is_causal, ...> (flash_attn 2.x csrc/flash_attn/src/flash_{fwd,bwd}_launch_template.h;
// PyTorch's pytorch_flash copy keeps the order). nullopt when the name does not carry them.
std::optional<bool> flash_causal(const std::string& kernel) {
  std::size_t at = kernel.find("flash_fwd_kernel<");
  if (at == std::string::npos) at = kernel.find("flash_bwd_dq_dk_dv_loop");
  if (at == std::string::npos) return std::nullopt;
  at = kernel.find('<', at);
  std::vector<std::string> args(1);
  int depth = 0;
  for (std::size_t i = at; i < kernel.size(); ++i) {
    const char c = kernel[i];
    if (c == '<') {
      if (depth++ == 0) continue;
    } else if (c == '>') {
      if (--depth == 0) break;
    } else if (c == ',' && depth == 1) {
      args.emplace_back();
      continue;
    }
    if (depth >= 1 && c != ' ') args.back() += c;
  }
  if (args.size() < 3 || (args[2] != "true" && args[2] != "false")) return std::nullopt;
  return args[2] == "true";
}

}  // namespace

std::string kernel_class_of(const std::string& raw) {
  std::string n = raw;
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (is_comm_kernel_name(raw)) return "collective";
  // cuDNN's fused attention (cudnn_generated_fort_native_sdpa_*) before the cudnn -> conv rule.
  if (contains(n, "flash") || contains(n, "fmha") || contains(n, "attention") || contains(n, "sdpa")) return "attention";
  if (contains(n, "cudnn") || contains(n, "conv") || contains(n, "fprop") || contains(n, "dgrad") ||
      contains(n, "wgrad"))
    return "conv";
  if (contains(n, "gemm") || contains(n, "cutlass") || contains(n, "xmma") || contains(n, "cublas") ||
      contains(n, "s16816") || contains(n, "s1688") || contains(n, "splitk"))
    return "gemm";
  if (contains(n, "multi_tensor_apply") || contains(n, "adam") || contains(n, "sgd")) return "optimizer";
  if (contains(n, "softmax") || contains(n, "norm") || contains(n, "reduce")) return "reduction";
  if (contains(n, "elementwise") || contains(n, "unrolled") || contains(n, "vectorized") || contains(n, "copy") ||
      contains(n, "fill") || contains(n, "cat_"))
    return "elementwise";
  return "other";
}

namespace {

struct DispatchSamples {
  std::vector<Time> forward, backward, launch;
};

// Intervals between consecutive runtime calls (kernel launches, copies) on each host thread,
// below 1 ms (longer ones are blocking waits, not dispatch). The autograd thread is the one
// running autograd::engine spans; the forward thread the busiest other one.
void host_dispatch(const KinetoTrace& t, DispatchSamples& out) {
  // Kernel launches only (a runtime call whose correlation id is a kernel's), as
  // tools/fit_compute_from_trace.py counts cudaLaunchKernel: copies, memsets and event calls
  // come in quick runs that are not an op's dispatch.
  std::unordered_set<std::int64_t> kernel_corr;
  for (const GpuOp& op : t.gpu_ops)
    if (op.kind == GpuOp::Kind::Kernel && op.correlation >= 0) kernel_corr.insert(op.correlation);
  std::map<std::int64_t, std::vector<const RuntimeCall*>> by_thread;
  for (const RuntimeCall& r : t.runtime)
    if (kernel_corr.count(r.correlation)) by_thread[r.thread].push_back(&r);
  std::map<std::int64_t, std::size_t> backward_spans;
  for (const CpuSpan& s : t.cpu)
    if (s.kind == CpuSpan::Kind::Backward) ++backward_spans[s.thread];
  std::int64_t bw_thread = -1, fw_thread = -1;
  std::size_t best = 0;
  for (const auto& [th, n] : backward_spans)
    if (n > best) best = n, bw_thread = th;
  best = 0;
  for (const auto& [th, v] : by_thread)
    if (th != bw_thread && v.size() > best) best = v.size(), fw_thread = th;
  for (auto& [th, v] : by_thread) {
    if (th != bw_thread && th != fw_thread) continue;
    std::stable_sort(v.begin(), v.end(), [](const RuntimeCall* a, const RuntimeCall* b) { return a->start < b->start; });
    auto& dst = th == bw_thread ? out.backward : out.forward;
    for (std::size_t i = 1; i < v.size(); ++i) {
      Time gap = v[i]->start - v[i - 1]->start;
      if (gap < Time::from_ms(1)) dst.push_back(gap);
    }
    for (const RuntimeCall* r : v) out.launch.push_back(r->end - r->start);
  }
}

using TimesByShape = std::map<GemmShape, std::vector<Time>>;

// The trace's NCCL collectives with a known kind, size and group; the others are counted as skipped.
void add_collectives(const KinetoTrace& t, const TraceAnalysis& a, TraceFitData& d) {
  for (const CollectiveRecord& r : a.collectives) {
    auto kind = to_collective_kind(r.kind);
    if (!kind || r.bytes.count <= 0 || r.group_size <= 0) {
      ++d.skipped_collectives;
      continue;
    }
    double covered = r.duration.ns > 0 ? 1.0 - static_cast<double>(r.exposed.ns) / static_cast<double>(r.duration.ns) : 0;
    d.collectives.push_back(TraceCollectivePoint{*kind, r.group_size, r.group_assumed, r.bytes, r.duration, r.dtype,
                                                 "", t.rank, r.step, r.bytes.count <= 8, std::clamp(covered, 0.0, 1.0)});
  }
}

// Collective kernel intervals of this device, by start (for the contention split).
std::vector<std::pair<Time, Time>> collective_intervals(const KinetoTrace& t, int dev) {
  std::vector<std::pair<Time, Time>> colls;
  for (const GpuOp& op : t.gpu_ops)
    if (op.device == dev && op.collective) colls.emplace_back(op.start, op.end);
  std::sort(colls.begin(), colls.end());
  return colls;
}

// The durations of this device's non-collective kernels, memcpys and memsets in the selected
// steps, by kernel class.
void add_kernel_classes(const KinetoTrace& t, const TraceIndex& idx, int dev, const AnalyzeOptions& o,
                        std::map<std::string, std::vector<Time>>& by_class) {
  for (const GpuOp& op : t.gpu_ops) {
    if (op.device != dev || op.collective) continue;
    auto s = idx.step_of(op);
    if (!s || !selected(idx.steps()[*s]->step_number, o)) continue;
    std::string cls = op.kind == GpuOp::Kind::Memcpy   ? "memcpy"
                      : op.kind == GpuOp::Kind::Memset ? "memset"
                                                       : kernel_class_of(t.name_of(op));
    by_class[cls].push_back(op.end - op.start);
  }
}

// Non-collective kernels by correlation id, and the runtime calls launching them per thread, by start.
struct KernelLaunches {
  std::unordered_map<std::int64_t, const GpuOp*> by_corr;
  std::map<std::int64_t, std::vector<const RuntimeCall*>> by_thread;
};

KernelLaunches kernel_launches(const KinetoTrace& t) {
  KernelLaunches l;
  for (const GpuOp& op : t.gpu_ops)
    if (op.correlation >= 0 && op.kind == GpuOp::Kind::Kernel && !op.collective) l.by_corr.emplace(op.correlation, &op);
  for (const RuntimeCall& r : t.runtime)
    if (l.by_corr.count(r.correlation)) l.by_thread[r.thread].push_back(&r);
  for (auto& [th, v] : l.by_thread)
    std::stable_sort(v.begin(), v.end(), [](const RuntimeCall* a, const RuntimeCall* b) { return a->start < b->start; });
  return l;
}

// Beside an NCCL kernel: any collective of this device overlapping the kernel `first`.
bool beside_collective(const std::vector<std::pair<Time, Time>>& colls, const GpuOp& first) {
  auto c = std::upper_bound(colls.begin(), colls.end(), first.end,
                            [](Time x, const std::pair<Time, Time>& iv) { return x < iv.first; });
  bool beside = false;
  for (auto it2 = c; it2 != colls.begin() && !beside;) {
    --it2;
    beside = it2->second > first.start;
    if (first.start - it2->first > Time::from_ms(1000)) break;
  }
  return beside;
}

// The kernels a CPU span launched (runtime calls on its thread inside it), in launch order, and
// their summed GPU time.
struct SpanKernels {
  std::vector<const GpuOp*> kernels;
  Time total;
};

template <class Span>
SpanKernels kernels_in(const KernelLaunches& launches, const Span& span) {
  SpanKernels out;
  auto it = launches.by_thread.find(span.thread);
  if (it == launches.by_thread.end()) return out;
  const auto& v = it->second;
  for (auto lo = std::lower_bound(v.begin(), v.end(), span.start, [](const RuntimeCall* r, Time x) { return r->start < x; });
       lo != v.end() && (*lo)->start <= span.end; ++lo) {
    const GpuOp* k = launches.by_corr.at((*lo)->correlation);
    out.kernels.push_back(k);
    out.total += k->end - k->start;
  }
  return out;
}

// Whether a span's kernels count: some GPU time, and the first kernel in a selected step.
bool counted(const SpanKernels& k, const TraceIndex& idx, const AnalyzeOptions& o) {
  if (k.kernels.empty() || k.total.ns <= 0) return false;
  auto s = idx.step_of(*k.kernels.front());
  return s && selected(idx.steps()[*s]->step_number, o);
}

// GEMMs: the kernels launched inside each aten::mm/addmm/bmm/baddbmm call (same thread), by
// shape, apart from those beside an NCCL kernel.
void add_gemms(const KinetoTrace& t, const KernelLaunches& launches, const TraceIndex& idx, const AnalyzeOptions& o,
               const std::vector<std::pair<Time, Time>>& colls, TimesByShape& by_shape, TimesByShape& by_shape_overlapped) {
  for (const CpuSpan& span : t.cpu) {
    if (span.kind != CpuSpan::Kind::Gemm) continue;
    GemmShape shape;
    const OpInputs& inputs = t.inputs_of(span);
    if (!gemm_shape(t.names[static_cast<std::size_t>(span.name)], inputs.dims, shape)) continue;
    std::string dt = canonical_dtype(inputs.type);
    if (dt == "bf16") shape.dtype = Dtype::BF16;
    else if (dt == "fp16") shape.dtype = Dtype::FP16;
    else if (dt == "fp32") shape.dtype = Dtype::FP32;
    else continue;
    const SpanKernels k = kernels_in(launches, span);
    if (!counted(k, idx, o)) continue;
    shape.layout = gemm_layout_of_kernel(t.name_of(*k.kernels.front()));
    (beside_collective(colls, *k.kernels.front()) ? by_shape_overlapped : by_shape)[shape].push_back(k.total);
  }
}

// Fused attention: the kernels launched inside each flash_attn / sdpa attention call (same
// thread), by kernel family, direction and shape; causal from the forward kernel's name.
struct AttentionKey {
  AttentionKernel kernel;
  bool backward;
  std::int64_t batch, seq, hidden, head_dim;
  auto operator<=>(const AttentionKey&) const = default;
};
struct AttentionTimes {
  std::vector<Time> times;
  std::optional<bool> causal;
};
using AttentionByKey = std::map<AttentionKey, AttentionTimes>;

void add_attention(const KinetoTrace& t, const KernelLaunches& launches, const TraceIndex& idx, const AnalyzeOptions& o,
                   AttentionByKey& out) {
  std::map<std::vector<std::int64_t>, std::int64_t> varlen_batch;
  std::vector<const CpuSpan*> spans;
  for (const CpuSpan& span : t.cpu)
    if (span.kind == CpuSpan::Kind::Attention) spans.push_back(&span);
  std::stable_sort(spans.begin(), spans.end(), [](const CpuSpan* a, const CpuSpan* b) { return a->start < b->start; });
  for (const CpuSpan* span : spans) {
    const std::string& op = t.names[static_cast<std::size_t>(span->name)];
    auto shape = attention_shape(op, t.inputs_of(*span).dims, varlen_batch);
    if (!shape) continue;
    const SpanKernels k = kernels_in(launches, *span);
    if (!counted(k, idx, o)) continue;
    std::optional<bool> causal;
    for (const GpuOp* g : k.kernels)
      if (!causal) causal = flash_causal(t.name_of(*g));
    const AttentionKernel kernel = op.find("efficient") != std::string::npos ? AttentionKernel::SdpaEfficient
                                   : op.find("cudnn") != std::string::npos  ? AttentionKernel::SdpaCudnn
                                   : op.starts_with("aten::")              ? AttentionKernel::SdpaFlash
                                                                           : AttentionKernel::Flash;
    const bool backward = attention_backward(op);
    AttentionTimes& slot = out[AttentionKey{kernel, backward, shape->batch, shape->seq, shape->hidden, shape->head_dim}];
    slot.times.push_back(k.total);
    if (causal && !slot.causal) slot.causal = causal;
  }
}

void add_attention_points(const AttentionByKey& by_key, TraceFitData& d) {
  for (const auto& [key, times] : by_key) {
    AttentionPoint a;
    a.kernel = key.kernel;
    a.backward = key.backward;
    a.batch = key.batch;
    a.seq = key.seq;
    a.hidden = key.hidden;
    a.head_dim = key.head_dim;
    // The backward's kernels name Is_causal too; else the forward of the same shape says it.
    std::optional<bool> causal = times.causal;
    if (!causal) {
      auto f = by_key.find(AttentionKey{key.kernel, !key.backward, key.batch, key.seq, key.hidden, key.head_dim});
      if (f != by_key.end()) causal = f->second.causal;
    }
    a.causal = causal.value_or(true);
    a.causal_assumed = !causal;
    a.count = times.times.size();
    a.median = median_of(times.times);
    // Per FLOP the kernel executes, as the prediction prices it: a head between two compiled
    // widths runs the wider one (attention_kernel_head_dim).
    const AttentionWork work{fused_attention_flops(a.batch, a.seq, a.hidden, a.backward, a.causal), a.kernel, a.backward,
                             a.seq, a.head_dim};
    a.rate = FlopRate{attention_executed_flops(work).count / a.median.seconds()};
    d.attention.push_back(a);
  }
}

// Memory-bound kernels (MemoryClassPoint): each kernel attributed to the innermost op with
// known traffic that launched it and nothing else.
constexpr Time kMinMemoryKernel = Time::from_ns(20000);  // shorter ones measure launch and tail, not bandwidth
using MemoryByClass = std::map<KernelClass, MemoryClassPoint>;

bool fitted_memory_class(KernelClass c) {
  return c == KernelClass::Elementwise || c == KernelClass::ElementwiseStrided || c == KernelClass::Reduction ||
         c == KernelClass::Norm;
}

void add_memory_ops(const KinetoTrace& t, const KernelLaunches& launches, const TraceIndex& idx, const AnalyzeOptions& o,
                    const std::vector<std::pair<Time, Time>>& colls, MemoryByClass& out, TraceFitData& d) {
  // Each kernel belongs to the innermost op with known traffic whose span holds its launch: a
  // nested op's kernel (the mul inside _softmax_backward_data) is the nested op's.
  std::unordered_map<const GpuOp*, const MemoryOpSpan*> owner;
  for (const MemoryOpSpan& span : t.memory_ops) {
    for (const GpuOp* k : kernels_in(launches, span).kernels) {
      auto [it, fresh] = owner.try_emplace(k, &span);
      if (!fresh && span.end - span.start < it->second->end - it->second->start) it->second = &span;
    }
  }
  std::unordered_map<const MemoryOpSpan*, std::vector<const GpuOp*>> own;
  for (const auto& [k, span] : owner) own[span].push_back(k);
  KernelClassOfName class_of(t);
  for (const auto& [span, kernels] : own) {
    if (kernels.size() != 1) continue;  // the op's bytes would be split among its kernels
    const GpuOp& kernel = *kernels.front();
    const Time dur = kernel.end - kernel.start;
    auto step = idx.step_of(kernel);
    if (!step || !selected(idx.steps()[*step]->step_number, o)) continue;
    if (dur < kMinMemoryKernel || beside_collective(colls, kernel)) continue;
    if (const std::string& name = t.names[static_cast<std::size_t>(span->name)]; is_inductor_kernel_name(name)) {
      (is_inductor_reduction_name(name) ? d.inductor_reductions : d.inductor_pointwise)
          .push_back(MemoryKernel{span->bytes, dur, span->largest});
      continue;
    }
    const KernelClass cls = class_of(kernel);
    if (!fitted_memory_class(cls)) continue;
    MemoryClassPoint& m = out[cls];
    m.cls = cls;
    ++m.count;
    m.bytes += Bytes{span->bytes};
    m.time += dur;
    m.kernels.push_back(MemoryKernel{span->bytes, dur, span->largest});
    if (span->elements > 0 && static_cast<double>(span->bytes) <= kElementBoundBytes * static_cast<double>(span->elements)) {
      ElementTiming& e = span->casts ? m.cast : m.plain;
      ++e.count;
      e.elements += span->elements;
      e.time += dur;
    } else {
      m.byte_bound_bytes += Bytes{span->bytes};
      m.byte_bound_time += dur;
    }
  }
}

void add_memory_points(const MemoryByClass& by_class, TraceFitData& d) {
  for (auto [cls, m] : by_class) {
    m.rate = Bandwidth{static_cast<double>(m.bytes.count) / m.time.seconds()};
    for (ElementTiming* e : {&m.plain, &m.cast})
      if (e->elements > 0) e->ns_per_element = static_cast<double>(e->time.ns) / static_cast<double>(e->elements);
    if (m.byte_bound_time > Time{})
      m.byte_bound_rate = Bandwidth{static_cast<double>(m.byte_bound_bytes.count) / m.byte_bound_time.seconds()};
    d.memory_classes.push_back(m);
  }
}

void add_kernel_class_timings(const std::map<std::string, std::vector<Time>>& by_class, TraceFitData& d) {
  for (auto& [cls, v] : by_class) {
    KernelClassTiming k;
    k.cls = cls;
    k.count = v.size();
    for (Time x : v) k.total += x;
    k.median = median_of(v);
    d.kernel_classes.push_back(k);
  }
}

// One GEMM point per shape (median alone and beside NCCL), and the compute slowdown beside NCCL:
// the median over shapes seen at least 3 times each way of (median beside / median alone) - 1.
// A shape seen only beside NCCL is brought back to its solo rate, since the engine slows it there
// again: by that measured slowdown, else by the SM share (the SMs known), else not.
void add_gemm_points(TimesByShape& by_shape, const TimesByShape& by_shape_overlapped, TraceFitData& d) {
  std::vector<double> ratios;
  for (auto& [shape, ov] : by_shape_overlapped) {
    auto alone = by_shape.find(shape);
    if (alone != by_shape.end() && alone->second.size() >= 3 && ov.size() >= 3)
      ratios.push_back(static_cast<double>(median_of(ov).ns) / static_cast<double>(median_of(alone->second).ns));
  }
  if (!ratios.empty()) {
    std::sort(ratios.begin(), ratios.end());
    d.contention_shapes = ratios.size();
    d.compute_slowdown = std::max(0.0, ratios[ratios.size() / 2] - 1.0);
  }
  ContentionProfile sm_share;
  sm_share.gpu_sms = d.gpu_sms;
  sm_share.collective_sms = d.sm_counts_usable() ? d.collective_sms : 0;
  const double beside_only_slowdown = d.contention_shapes > 0 ? d.compute_slowdown : sm_share.models_resources() ? sm_share.compute_bound_slowdown(1) : 0.0;
  for (auto& [shape, ov] : by_shape_overlapped)
    if (!by_shape.count(shape)) by_shape[shape];  // shapes only ever seen beside NCCL
  for (auto& [shape, v] : by_shape) {
    GemmPoint g;
    g.shape = shape;
    auto ov = by_shape_overlapped.find(shape);
    g.overlapped = ov == by_shape_overlapped.end() ? 0 : ov->second.size();
    if (g.overlapped) g.median_overlapped = median_of(ov->second);
    g.count = v.size() + g.overlapped;
    g.median = v.empty() ? g.median_overlapped : median_of(v);
    if (v.empty()) g.solo_correction = 1.0 + beside_only_slowdown;
    g.rate = FlopRate{shape.flops().count / g.median.seconds() * g.solo_correction};
    d.gemms.push_back(g);
  }
}

void set_host_costs(const DispatchSamples& dispatch, TraceFitData& d) {
  auto median_or_zero = [](const std::vector<Time>& v) { return v.empty() ? Time::zero() : median_of(v); };
  d.host.eager_op = median_or_zero(dispatch.forward);
  d.host.autograd_op = median_or_zero(dispatch.backward);
  d.host.kernel_launch = median_or_zero(dispatch.launch);
  d.host.forward_launches = dispatch.forward.size();
  d.host.backward_launches = dispatch.backward.size();
}

// The host time of the training loop around each selected step: from the ProfilerStep's start
// to the step's first GPU op, and from its last GPU op's end to the span's end.
void add_step_edges(const KinetoTrace& t, const TraceIndex& idx, int dev, const AnalyzeOptions& o,
                    std::vector<Time>& starts, std::vector<Time>& ends) {
  const auto& steps = idx.steps();
  const Time none{std::numeric_limits<std::int64_t>::max()};
  std::vector<Time> first(steps.size(), none), last(steps.size());
  for (const GpuOp& op : t.gpu_ops) {
    if (op.device != dev) continue;
    auto st = idx.step_of(op);
    if (!st) continue;
    first[*st] = std::min(first[*st], op.start);
    last[*st] = std::max(last[*st], op.end);
  }
  for (std::size_t k = 0; k < steps.size(); ++k) {
    if (first[k] == none || !selected(steps[k]->step_number, o)) continue;
    starts.push_back(std::max(Time{}, first[k] - steps[k]->start));
    ends.push_back(std::max(Time{}, steps[k]->end - last[k]));
  }
}

// DeepSpeed's monitor writes (CpuSpan::Kind::MonitorWrite) inside the selected steps.
void add_monitor_writes(const KinetoTrace& t, const TraceIndex& idx, const AnalyzeOptions& o, std::vector<Time>& writes) {
  for (const CpuSpan& s : t.cpu) {
    if (s.kind != CpuSpan::Kind::MonitorWrite) continue;
    auto st = idx.step_at(s.start);
    if (st && selected(idx.steps()[*st]->step_number, o)) writes.push_back(s.end - s.start);
  }
}

// Per backward call (CpuSpan::Kind::RunBackward) inside the selected steps: the engine's start
// (run_backward's start to the first evaluate_function inside it) per node evaluated inside it.
void add_engine_starts(const KinetoTrace& t, const TraceIndex& idx, const AnalyzeOptions& o, std::vector<double>& ns_per_node) {
  std::vector<Time> nodes;
  for (const CpuSpan& s : t.cpu)
    if (s.kind == CpuSpan::Kind::Backward) nodes.push_back(s.start);
  std::sort(nodes.begin(), nodes.end());
  for (const CpuSpan& s : t.cpu) {
    if (s.kind != CpuSpan::Kind::RunBackward) continue;
    auto st = idx.step_at(s.start);
    if (!st || !selected(idx.steps()[*st]->step_number, o)) continue;
    const auto first = std::lower_bound(nodes.begin(), nodes.end(), s.start);
    const auto last = std::upper_bound(first, nodes.end(), s.end);
    if (first == last) continue;
    ns_per_node.push_back(static_cast<double>((*first - s.start).ns) / static_cast<double>(last - first));
  }
}

// Collectives slowed by compute beside them (TraceFitData::comm_slowdown): the same kind, group
// and size alone and beside compute kernels. Host-synchronised scalars measure the host, not NCCL.
void add_comm_contention(TraceFitData& d) {
  struct Split {
    std::vector<Time> alone, beside;
    std::vector<double> covered;
  };
  std::map<std::tuple<CollectiveKind, int, std::int64_t>, Split> by_key;
  for (const auto& p : d.collectives) {
    if (p.host_synchronised) continue;
    Split& s = by_key[{p.kind, p.ranks, p.bytes.count}];
    if (p.overlapped_fraction < 0.05) s.alone.push_back(p.time);
    else if (p.overlapped_fraction >= 0.5) s.beside.push_back(p.time), s.covered.push_back(p.overlapped_fraction);
  }
  std::vector<double> factors;
  for (auto& [key, s] : by_key) {
    if (s.alone.size() < 3 || s.beside.size() < 3) continue;
    std::sort(s.covered.begin(), s.covered.end());
    double f = s.covered[s.covered.size() / 2];
    double ratio = static_cast<double>(median_of(s.beside).ns) / static_cast<double>(median_of(s.alone).ns);
    factors.push_back((ratio - 1.0) / f);
  }
  if (factors.empty()) return;
  std::sort(factors.begin(), factors.end());
  d.comm_contention_keys = factors.size();
  d.comm_slowdown = std::max(0.0, factors[factors.size() / 2]);
}

// The GPU's SMs and the CTAs of its bulk NCCL kernels (see TraceFitData::collective_sms).
void add_collective_sms(const KinetoTrace& t, int dev, std::vector<std::int64_t>& ctas, TraceFitData& d) {
  for (const DeviceInfo& info : t.devices)
    if (info.id == dev && info.sms > 0) d.gpu_sms = info.sms;
  for (const GpuOp& op : t.gpu_ops)
    if (op.device == dev && op.collective && op.ctas > 0 && op.end - op.start >= Time::from_us(100)) ctas.push_back(op.ctas);
}

}  // namespace

TraceFitData extract_fit_data(const std::vector<KinetoTrace>& traces, const AnalyzeOptions& o) {
  TraceFitData d;
  std::vector<std::int64_t> collective_ctas;
  std::map<std::string, std::vector<Time>> by_class;
  TimesByShape by_shape, by_shape_overlapped;
  AttentionByKey attention;
  MemoryByClass memory;
  DispatchSamples dispatch;
  std::vector<Time> step_starts, step_ends, monitor_writes;
  std::vector<double> engine_ns_per_node;
  std::vector<HostFrame> head_frames, tail_frames;  // totals over the traces' steps
  std::size_t frame_steps = 0;
  for (const KinetoTrace& t : traces) {
    const TraceAnalysis analysis = analyze_trace(t, o);
    add_collectives(t, analysis, d);
    if (const auto idle = attribute_idle(t, analysis)) {
      const auto n = static_cast<std::int64_t>(idle->steps);
      for (const HostFrame& f : idle->head_frames) add_frame_time(head_frames, f.name, Time::from_ns(f.total.ns * n));
      for (const HostFrame& f : idle->tail_frames) add_frame_time(tail_frames, f.name, Time::from_ns(f.total.ns * n));
      frame_steps += idle->steps;
    }
    TraceIndex idx(t);
    int dev = t.main_device();
    const std::vector<std::pair<Time, Time>> colls = collective_intervals(t, dev);
    host_dispatch(t, dispatch);
    add_kernel_classes(t, idx, dev, o, by_class);
    add_step_edges(t, idx, dev, o, step_starts, step_ends);
    add_monitor_writes(t, idx, o, monitor_writes);
    add_engine_starts(t, idx, o, engine_ns_per_node);
    const KernelLaunches launches = kernel_launches(t);
    add_gemms(t, launches, idx, o, colls, by_shape, by_shape_overlapped);
    add_attention(t, launches, idx, o, attention);
    add_memory_ops(t, launches, idx, o, colls, memory, d);
    add_collective_sms(t, dev, collective_ctas, d);
  }
  if (!collective_ctas.empty()) {
    std::sort(collective_ctas.begin(), collective_ctas.end());
    d.collective_sms = static_cast<int>(collective_ctas[collective_ctas.size() / 2]);
    d.collective_grid_kernels = collective_ctas.size();
  }
  add_memory_points(memory, d);
  add_kernel_class_timings(by_class, d);
  add_gemm_points(by_shape, by_shape_overlapped, d);
  add_comm_contention(d);
  add_attention_points(attention, d);
  set_host_costs(dispatch, d);
  for (auto [frames, out] : {std::pair{&head_frames, &d.host.step_start_frames}, std::pair{&tail_frames, &d.host.step_end_frames}}) {
    for (const HostFrame& f : *frames)
      out->push_back(HostFrame{f.name, Time::from_ns(f.total.ns / static_cast<std::int64_t>(std::max<std::size_t>(1, frame_steps)))});
    sort_frames(*out);
  }
  d.host.steps = step_starts.size();
  if (!step_starts.empty()) d.host.step_start = median_of(step_starts), d.host.step_end = median_of(step_ends);
  d.host.monitor_writes = monitor_writes.size();
  if (!monitor_writes.empty()) d.host.monitor_write = median_of(monitor_writes);
  d.host.backward_calls = engine_ns_per_node.size();
  if (!engine_ns_per_node.empty()) {
    d.host.autograd_engine_per_node = Time{static_cast<std::int64_t>(std::llround(median(engine_ns_per_node)))};
  }
  return d;
}

std::map<CollectiveKind, std::map<int, std::vector<MeasuredCollective>>> collective_table(const TraceFitData& d,
                                                                                          bool include_assumed_groups) {
  std::map<std::tuple<CollectiveKind, int, std::int64_t>, std::vector<Time>> groups;
  for (const auto& p : d.collectives)
    if (include_assumed_groups || !p.ranks_assumed) groups[{p.kind, p.ranks, p.bytes.count}].push_back(p.time);
  std::map<CollectiveKind, std::map<int, std::vector<MeasuredCollective>>> out;
  // std::map iteration is by (kind, ranks, bytes): each vector comes out sorted by bytes.
  for (auto& [key, times] : groups)
    out[std::get<0>(key)][std::get<1>(key)].push_back(MeasuredCollective{Bytes{std::get<2>(key)}, median_of(times)});
  return out;
}

std::vector<GemmMeasurement> gemm_table(const TraceFitData& d) {
  std::vector<GemmMeasurement> out;
  for (const auto& g : d.gemms) out.push_back(GemmMeasurement{g.shape, g.rate});
  return out;
}

calib::FitInputs fit_inputs(const TraceFitData& d, const std::string& label, const TraceFitOptions& o) {
  calib::FitInputs in;
  std::map<std::pair<CollectiveKind, int>, std::map<std::int64_t, std::vector<Time>>> by_group;
  for (const auto& p : d.collectives) {
    // A host-synchronised tiny all-reduce (the grad-norm / overflow scalar) measures the host's
    // wait, not NCCL's latency: left out (its count is in the compute fit's provenance).
    if (p.host_synchronised) continue;
    if (p.ranks_assumed && o.group_size > 0) {
      // A trace that records no group size records no output size either (record_param_comms
      // without its arguments): an all-gather's S was taken as the per-rank input times the
      // assumed world size (trace_index.cpp); rescale it to the stated group.
      std::int64_t bytes = p.bytes.count;
      if (p.kind == CollectiveKind::AllGather && p.ranks > 0) bytes = bytes / p.ranks * o.group_size;
      by_group[{p.kind, o.group_size}][bytes].push_back(p.time);
    } else if (!p.ranks_assumed || o.keep_assumed_groups) {
      by_group[{p.kind, p.ranks}][p.bytes.count].push_back(p.time);
    }
  }
  for (auto& [key, by_size] : by_group) {
    if (key.second < 2) continue;
    calib::CollectiveSeries s;
    s.source = label;
    s.label = fmt::format("trace, {} ranks", key.second);
    s.kind = key.first;
    s.ranks = key.second;
    s.nodes = (key.second + o.gpus_per_node - 1) / o.gpus_per_node;
    for (auto& [bytes, times] : by_size) {
      std::sort(times.begin(), times.end());
      const Time t = o.use_min ? times.front() : times[times.size() / 2];
      // A size whose kernels read 0 us (normal in integer-microsecond traces: below the trace's
      // resolution) or less measures nothing a line can be fitted to: left out.
      if (t <= Time{} || bytes < 0) continue;
      s.samples.push_back(calib::CollectiveSample{Bytes{bytes}, t, false, 0});
    }
    if (s.samples.empty()) continue;
    in.collectives.push_back(std::move(s));
  }
  for (const auto& g : d.gemms) in.gemm.push_back(calib::GemmSample{g.shape, g.rate, -1, label});
  return in;
}

namespace {

// The most-called point of a kernel family in one direction.
const AttentionPoint* busiest(const TraceFitData& d, AttentionKernel k, bool backward) {
  const AttentionPoint* best = nullptr;
  for (const auto& a : d.attention)
    if (a.kernel == k && a.backward == backward && (!best || a.count > best->count)) best = &a;
  return best;
}

// Each attention kernel family measured in both directions becomes its compute.attention rate:
// the measured fraction of bf16 peak at the trace's sequence length s, carried to long sequences
// by the base profile's half_rate_seq for that kernel (else flash's; e = measured x (s + half) / s);
// none in the base: the measured fraction at every length.
void apply_attention_rates(const TraceFitData& d, const ComputeProfile& base, HardwareProfile& p, nlohmann::json& j) {
  auto peak = p.compute.peak.find(Dtype::BF16);
  if (peak == p.compute.peak.end() || peak->second.flops_per_s <= 0) return;
  for (int i = 0; i < kAttentionKernelCount; ++i) {
    const auto k = static_cast<AttentionKernel>(i);
    const AttentionPoint* f = busiest(d, k, false);
    const AttentionPoint* b = busiest(d, k, true);
    if (!f || !b) continue;
    auto& slot = p.compute.attention_rates[static_cast<std::size_t>(i)];
    const auto& flash = p.compute.attention_rates[static_cast<std::size_t>(AttentionKernel::Flash)];
    AttentionRate r;
    r.half_rate_seq = slot ? slot->half_rate_seq : flash ? flash->half_rate_seq : 0;
    auto long_seq = [&](const AttentionPoint& a) {
      const double measured = a.rate.flops_per_s / peak->second.flops_per_s;
      return std::min(1.0, measured * static_cast<double>(a.seq + r.half_rate_seq) / static_cast<double>(a.seq));
    };
    r.forward = long_seq(*f);
    r.backward = long_seq(*b);
    slot = r;
    j["attention"][to_string(k)] = {
        {"seq", f->seq},
        {"head_dim", f->head_dim},  // the rates are per FLOP of its kernel's width (attention_kernel_head_dim)
        {"causal", f->causal},
        {"causal_assumed", f->causal_assumed},
        {"calls", {f->count, b->count}},
        {"forward_fraction_of_peak", f->rate.flops_per_s / peak->second.flops_per_s},
        {"backward_fraction_of_peak", b->rate.flops_per_s / peak->second.flops_per_s},
        {"half_rate_seq", r.half_rate_seq},
        {"forward", r.forward},
        {"backward", r.backward},
        // What the base profile prices this kernel at, at the trace's sequence length.
        {"base_forward_fraction_of_peak", attention_efficiency(base, AttentionWork{Flops{}, k, false, f->seq})},
        {"base_backward_fraction_of_peak", attention_efficiency(base, AttentionWork{Flops{}, k, true, b->seq})}};
  }
}

// Every number the trace replaced names the trace as its source: the base profile's entry would
// name another measurement (the A800's Megatron trace for a value now fitted on your job).
void source_fitted_keys(const nlohmann::json& fitted, HardwareProfile& p) {
  static constexpr std::pair<const char*, const char*> kPaths[] = {
      {"eager_op_overhead_us", "host.eager_op_overhead_us"},
      {"kernel_launch_overhead_us", "host.kernel_launch_overhead_us"},
      {"autograd_op_overhead_us", "host.autograd_op_overhead_us"},
      {"step_start_us", "host.step_start_us"},
      {"step_end_us", "host.step_end_us"},
      {"monitor_write_us", "host.monitor_write_us"},
      {"autograd_engine_per_node_us", "host.autograd_engine_per_node_us"},
      {"comm_slowdown", "contention.comm_slowdown"},
      {"compute_slowdown", "contention.compute_slowdown"},
      {"gpu_sms", "contention.gpu_sms"},
      {"collective_sms", "contention.collective_sms"},
      {"gemm_table", "compute.gemm_table"},
      {"elementwise_strided_ns_per_element", "compute.elementwise_strided_ns_per_element"},
      {"elementwise_strided_cast_ns_per_element", "compute.elementwise_strided_cast_ns_per_element"},
      {"dram_stream_GBps", "compute.dram_stream_GBps"},
  };
  if (!p.sources.is_object()) p.sources = nlohmann::json::object();
  auto from_trace = [](const std::string& key) {
    return fmt::format("stepsim fit --trace on the traces of provenance.inputs; how: provenance.trace_compute.{}", key);
  };
  for (const auto& [key, path] : kPaths)
    if (fitted.contains(key)) p.sources[path] = from_trace(key);
  for (const char* group : {"memory_bandwidth_GBps", "attention"})
    if (fitted.contains(group))
      for (const auto& [k, v] : fitted[group].items())
        if (!v.contains("kept"))
          p.sources[fmt::format("compute.{}.{}", group, k)] = from_trace(fmt::format("{}.{}", group, k));
}

// The kernels whose largest tensor is larger than `l2`: how many, their time, their bytes over it.
struct Split {
  std::size_t kernels = 0;
  Time time;
  Bandwidth rate;
};
Split split_by_tensor(const std::vector<MemoryKernel>& ks, std::int64_t l2) {
  Split s;
  std::int64_t bytes = 0;
  for (const MemoryKernel& k : ks)
    if (k.largest > l2) ++s.kernels, bytes += k.bytes, s.time += k.time;
  if (s.time > Time{}) s.rate = Bandwidth{static_cast<double>(bytes) / s.time.seconds()};
  return s;
}

}  // namespace

namespace {

// The clock the trace's GEMMs imply, against a base whose microbenchmark table (or roofline) was
// measured at compute.clock.boost_MHz: a compute-bound GEMM's rate is proportional to the SM
// clock, so one that ran at r times its boost-clock rate ran at r x boost. Per shape, with u its
// boost rate's fraction of peak, the full-load clock of the power law f = full_load x u^(-1/3)
// is f x u^(1/3) (docs/workload-ops.md, "Sustained clocks under the power limit"). Summarised
// by the calls' time-weighted clock and the median full-load clock over shapes; null without a
// clock block, or for a base whose table is in-training already. A shape the base prices under
// kMinClockGemm at boost is left out: its time is launch and tail, not the clock (a trace's
// [1 x 12] x [12 x 1] GEMMs ran at 10^-5 of their boost rate).
constexpr Time kMinClockGemm = Time::from_ns(20000);

nlohmann::json implied_clock(const TraceFitData& d, const ComputeProfile& base) {
  if (!base.clock.active() || (base.gemm_table_rates == GemmRates::InTraining && !base.gemm_table.empty()))
    return nlohmann::json();
  ComputeProfile at_boost = base;
  at_boost.clock = ClockProfile{};
  at_boost.model_memory_kernels = false;  // the math alone: memory-bound shapes say nothing of the clock
  std::vector<double> full_load;
  double boost_time = 0, measured_time = 0;
  const GemmTable table(at_boost);  // one scan's worth of log2 for all the shapes
  for (const auto& g : d.gemms) {
    const auto peak = base.peak.find(g.shape.dtype);
    if (peak == base.peak.end() || peak->second.flops_per_s <= 0 || g.rate.flops_per_s <= 0) continue;
    const Time priced = gemm_time(at_boost, g.shape, table);
    if (priced < kMinClockGemm) continue;
    const double boost_rate = g.shape.flops().count / priced.seconds();
    const double u = std::min(1.0, boost_rate / peak->second.flops_per_s);
    const double f = base.clock.boost_mhz * g.rate.flops_per_s / boost_rate;
    full_load.push_back(f * std::cbrt(u));
    boost_time += priced.seconds() * static_cast<double>(g.count);
    measured_time += g.shape.flops().count / g.rate.flops_per_s * static_cast<double>(g.count);
  }
  if (full_load.empty() || measured_time <= 0) return nlohmann::json();
  return {{"boost_MHz", base.clock.boost_mhz},
          {"gemm_MHz", std::round(base.clock.boost_mhz * boost_time / measured_time)},
          {"full_load_MHz", std::round(median(full_load))},
          {"base_full_load_MHz", base.clock.full_load_mhz},
          {"of", "the SM clock the trace's GEMMs ran at if their rate gap to the base's boost-clock rates is the clock: "
                 "time-weighted over calls (gemm_MHz), and as compute.clock.full_load_MHz (median over shapes)"}};
}

}  // namespace

nlohmann::json gemm_rates_against_base(const TraceFitData& d, const ComputeProfile& base) {
  std::vector<double> ratios;
  double measured_total = 0, base_total = 0;
  std::size_t calls = 0;
  const GemmTable table(base);
  for (const auto& g : d.gemms) {
    // A dtype the base has no peak for (a bare profile, fp8 on a pre-Hopper part) it cannot price.
    const auto peak = base.peak.find(g.shape.dtype);
    if (peak == base.peak.end() || peak->second.flops_per_s <= 0 || g.rate.flops_per_s <= 0) continue;
    const Time priced = gemm_time(base, g.shape, table);
    if (priced.ns <= 0) continue;
    const double measured_s = g.shape.flops().count / g.rate.flops_per_s;  // one call, solo
    ratios.push_back(priced.seconds() / measured_s);
    measured_total += measured_s * static_cast<double>(g.count);
    base_total += priced.seconds() * static_cast<double>(g.count);
    calls += g.count;
  }
  if (ratios.empty()) return nlohmann::json();
  const auto [lo, hi] = std::minmax_element(ratios.begin(), ratios.end());
  auto r3 = [](double v) { return std::round(v * 1000) / 1000; };
  nlohmann::json out = {{"base_rates", gemm_rate_source(base).text},
          {"shapes", ratios.size()},
          {"calls", calls},
          {"median", r3(median(ratios))},
          {"min", r3(*lo)},
          {"max", r3(*hi)},
          {"time_weighted", r3(base_total / measured_total)},
          {"of", "measured rate / the base profile's rate for the same shape (below 1: the trace's GEMMs ran slower than "
                 "the base prices them)"}};
  if (nlohmann::json clock = implied_clock(d, base); !clock.is_null()) out["implied_clock"] = clock;
  return out;
}

std::vector<std::string> against_base_summary(const nlohmann::json& trace_compute) {
  std::vector<std::string> out;
  if (trace_compute.contains("gemm_vs_base")) {
    const nlohmann::json& vs = trace_compute["gemm_vs_base"];
    out.push_back(fmt::format("gemm rates in the trace / the base profile's ({}): {:.3f} by time, median {:.3f} ({:.3f}-{:.3f}) "
                              "over {} shapes",
                              vs.at("base_rates").get<std::string>(), vs.at("time_weighted").get<double>(),
                              vs.at("median").get<double>(), vs.at("min").get<double>(), vs.at("max").get<double>(),
                              vs.at("shapes").get<std::size_t>()));
    if (vs.contains("implied_clock")) {
      const nlohmann::json& c = vs["implied_clock"];
      out.push_back(fmt::format("gemm clock the trace implies: {:g} MHz by time (boost {:g}); compute.clock.full_load_MHz {:g} "
                                "(the base profile's {:g})",
                                c.at("gemm_MHz").get<double>(), c.at("boost_MHz").get<double>(),
                                c.at("full_load_MHz").get<double>(), c.at("base_full_load_MHz").get<double>()));
    }
  }
  std::string classes;
  if (trace_compute.contains("memory_bandwidth_GBps"))
    for (const auto& [cls, entry] : trace_compute["memory_bandwidth_GBps"].items())
      if (entry.contains("GBps"))
        classes += fmt::format("{}{} {:.1f}{}", classes.empty() ? "" : ", ", cls, entry["GBps"].get<double>(),
                               entry.contains("base_GBps") ? fmt::format(" ({:.1f})", entry["base_GBps"].get<double>()) : "");
  if (!classes.empty()) out.push_back("memory-bound classes in the trace, GB/s (the base profile's): " + classes);
  return out;
}

namespace {

// compute.memory_bandwidth_GBps.inductor_reduction: the median achieved bandwidth of the
// reductions torch.compile generated (their arguments' bytes over their time), over those with at
// least 64 MiB of arguments (bandwidth-bound; smaller ones measure launch and tail) and at most
// the base's HBM bandwidth (above it an argument is broadcast or read in part, so its bytes are
// not what moved). At least 8 such kernels, else the base's stays.
// The median rate of Inductor's kernels by that rule, and how many it kept; nullopt under 8.
std::pair<std::optional<double>, std::size_t> inductor_median_gbps(const std::vector<trace::MemoryKernel>& kernels,
                                                                   const ComputeProfile& base) {
  constexpr std::int64_t kMinBytes = std::int64_t{64} << 20;
  std::vector<double> rates;
  for (const trace::MemoryKernel& k : kernels) {
    const double gbps = static_cast<double>(k.bytes) / k.time.seconds() / 1e9;
    if (k.bytes >= kMinBytes && (base.hbm.bytes_per_s <= 0 || gbps * 1e9 <= base.hbm.bytes_per_s)) rates.push_back(gbps);
  }
  if (rates.size() < 8) return {std::nullopt, rates.size()};
  return {median(rates), rates.size()};
}

void apply_inductor_reductions(const trace::TraceFitData& d, const ComputeProfile& base, HardwareProfile& p, nlohmann::json& j) {
  if (!d.inductor_pointwise.empty()) {
    const auto [gbps, n] = inductor_median_gbps(d.inductor_pointwise, base);
    nlohmann::json& out = j["inductor_pointwise_GBps"];
    out["kernels"] = n;
    out["used"] = "no: a reading only (the elementwise class prices Inductor's pointwise kernels)";
    if (gbps) out["GBps"] = std::round(*gbps * 10) / 10;
  }
  if (d.inductor_reductions.empty()) return;
  const auto [gbps, n] = inductor_median_gbps(d.inductor_reductions, base);
  nlohmann::json& out = j["memory_bandwidth_GBps"]["inductor_reduction"];
  out["kernels"] = n;
  out["of"] = "Inductor's reductions (triton_per_*, triton_red_*) with at least 64 MiB of arguments, at most the HBM's bandwidth; the median";
  if (!gbps) {
    out["kept"] = "the base profile's: fewer than 8 such kernels";
    return;
  }
  if (base.inductor_reduction.bytes_per_s > 0) out["base_GBps"] = std::round(base.inductor_reduction.gbps() * 10) / 10;
  p.compute.inductor_reduction = Bandwidth::from_gbps(*gbps);
  out["GBps"] = std::round(*gbps * 10) / 10;
}

}  // namespace

// The compute/host side of a trace fit: eager dispatch costs from the launch spacing, the
// compute slowdown beside NCCL kernels; the GEMM table from a trace is an in-training table;
// the fused attention kernels' rates; the reductions torch.compile generated.

void apply_trace_compute(const trace::TraceFitData& d, const ComputeProfile& base, HardwareProfile& p,
                         nlohmann::json& provenance) {
  nlohmann::json j;
  if (d.host.forward_launches >= 50) {
    p.host.eager_op_overhead = d.host.eager_op;
    p.host.kernel_launch_overhead = d.host.kernel_launch;
    j["eager_op_overhead_us"] = d.host.eager_op.us();
    j["kernel_launch_overhead_us"] = d.host.kernel_launch.us();
    j["forward_launches"] = d.host.forward_launches;
  }
  if (d.host.steps > 0) {
    p.host.step_start = d.host.step_start;
    p.host.step_end = d.host.step_end;
    j["step_start_us"] = d.host.step_start.us();
    j["step_end_us"] = d.host.step_end.us();
    j["steps"] = d.host.steps;
    // What they were made of (analyze --idle's frames; the five largest, mean per step).
    auto frames_json = [](const std::vector<HostFrame>& frames) {
      nlohmann::json out = nlohmann::json::array();
      for (std::size_t i = 0; i < frames.size() && i < 5; ++i) out.push_back({{"name", frames[i].name}, {"per_step_us", frames[i].total.us()}});
      return out;
    };
    j["step_start_frames"] = frames_json(d.host.step_start_frames);
    j["step_end_frames"] = frames_json(d.host.step_end_frames);
  }
  if (d.host.monitor_writes > 0) {
    p.host.monitor_write = d.host.monitor_write;
    j["monitor_write_us"] = d.host.monitor_write.us();
    j["monitor_writes"] = d.host.monitor_writes;
  }
  if (d.host.backward_calls > 0) {
    p.host.autograd_engine_per_node = d.host.autograd_engine_per_node;
    j["autograd_engine_per_node_us"] = d.host.autograd_engine_per_node.us();
    j["backward_calls"] = d.host.backward_calls;
  }
  if (d.host.backward_launches >= 50) {
    p.host.autograd_op_overhead = d.host.autograd_op;
    j["autograd_op_overhead_us"] = d.host.autograd_op.us();
    j["backward_launches"] = d.host.backward_launches;
  }
  if (d.comm_contention_keys > 0) {
    p.contention.comm_slowdown = d.comm_slowdown;
    j["comm_slowdown"] = d.comm_slowdown;
    j["comm_contention_keys"] = d.comm_contention_keys;
  }
  if (d.sm_counts_usable()) {
    p.contention.gpu_sms = d.gpu_sms;
    p.contention.collective_sms = d.collective_sms;
    j["gpu_sms"] = d.gpu_sms;
    j["collective_sms"] = d.collective_sms;
    j["collective_grid_kernels"] = d.collective_grid_kernels;
  }
  if (d.contention_shapes > 0) {
    // Measured on GEMMs: it prices every kernel when the SMs are not known; when they are, the
    // resource model replaces it, and its GEMM slowdown is recorded next to this one.
    p.contention.compute_slowdown = d.compute_slowdown;
    j["compute_slowdown"] = d.compute_slowdown;
    j["contention_shapes"] = d.contention_shapes;
    if (p.contention.models_resources())
      j["sm_share_gemm_slowdown"] = p.contention.compute_bound_slowdown(1);
  }
  if (!d.gemms.empty()) {
    p.compute.gemm_in_training_factor = 1.0;
    p.compute.gemm_table_rates = GemmRates::InTraining;
    p.compute.gemm_table_peak = FlopRate{};  // measured on this part
    j["gemm_table"] = "in-training rates (trace), gemm_in_training_factor 1";
    if (nlohmann::json vs = gemm_rates_against_base(d, base); !vs.is_null()) j["gemm_vs_base"] = vs;
    std::size_t beside_only = 0;
    double correction = 1.0;
    for (const auto& g : d.gemms)
      if (g.solo_correction > 1.0) ++beside_only, correction = g.solo_correction;
    if (beside_only > 0)
      j["gemm_shapes_only_beside_nccl"] = {{"shapes", beside_only}, {"rate_divided_by", 1.0 / correction},
                                           {"why", "every call ran beside an NCCL kernel: the solo rate is the overlapped one times 1 + the compute slowdown, which the engine applies again"}};
  }
  apply_attention_rates(d, base, p, j);
  // Enough kernels and time to stand for a class: at least 8 and 1 ms.
  const auto enough = [](std::size_t kernels, Time t) { return kernels >= 8 && t >= Time::from_ms(1); };
  for (const MemoryClassPoint& m : d.memory_classes) {
    if (!enough(m.count, m.time)) continue;
    // The non-vectorized path's times per element, plain and casting, each from enough kernels.
    bool per_element = false;
    const auto element_time = [&](const ElementTiming& e, double& key, const char* name) {
      if (m.cls != KernelClass::ElementwiseStrided || !enough(e.count, e.time)) return;
      per_element = true;
      key = std::round(e.ns_per_element * 1e5) / 1e5;
      j[name] = {{"ns", key}, {"kernels", e.count}, {"elements", e.elements}, {"ms", e.time.ms()}};
    };
    element_time(m.plain, p.compute.strided_element_ns, "elementwise_strided_ns_per_element");
    element_time(m.cast, p.compute.strided_cast_element_ns, "elementwise_strided_cast_ns_per_element");
    // With the per-element times fitted, the bandwidth prices the byte-bound kernels only, so it
    // comes from them; too few of them and the base's stays.
    const std::size_t kernels = per_element ? m.count - m.plain.count - m.cast.count : m.count;
    const Time time = per_element ? m.byte_bound_time : m.time;
    const Bandwidth rate = per_element ? m.byte_bound_rate : m.rate;
    nlohmann::json& out = j["memory_bandwidth_GBps"][to_string(m.cls)];
    if (per_element) out["of"] = fmt::format("kernels moving more than {:g} bytes per element", kElementBoundBytes);
    // With an L2 in the base profile, the elementwise kernels over larger tensors measure the
    // DRAM streaming rate. The class rate stays the one over every size: kernels the L2 holds
    // gain from it but small ones lose to launch and tail (the Megatron trace's elementwise
    // kernels run faster within the L2, its reductions slower), so no one side stands for it.
    if (m.cls == KernelClass::Elementwise && p.compute.l2_bytes > 0) {
      const Split beyond = split_by_tensor(m.kernels, static_cast<std::int64_t>(p.compute.l2_bytes));
      if (enough(beyond.kernels, beyond.time)) {
        p.compute.dram_stream = beyond.rate;
        j["dram_stream_GBps"] = {{"GBps", std::round(beyond.rate.gbps() * 10) / 10},
                                 {"kernels", beyond.kernels},
                                 {"ms", beyond.time.ms()},
                                 {"of", "elementwise kernels whose largest tensor is larger than the L2"}};
      }
    }
    out["kernels"] = kernels;
    out["ms"] = time.ms();
    if (!enough(kernels, time)) {
      out["kept"] = "the base profile's: fewer than 8 kernels or 1 ms";
      continue;
    }
    if (auto b = base.class_bandwidth.find(m.cls); b != base.class_bandwidth.end())
      out["base_GBps"] = std::round(b->second.gbps() * 10) / 10;
    p.compute.class_bandwidth[m.cls] = rate;
    out["GBps"] = std::round(rate.gbps() * 10) / 10;
  }
  apply_inductor_reductions(d, base, p, j);
  std::size_t skipped = 0;
  for (const auto& c : d.collectives) skipped += c.host_synchronised;
  j["host_synchronised_collectives_left_out"] = skipped;
  provenance["trace_compute"] = j;
  source_fitted_keys(j, p);
}

TraceCalibration trace_calibration(const std::vector<KinetoTrace>& traces, const std::vector<std::string>& files,
                                   const AnalyzeOptions& o, const TraceFitOptions& fo) {
  TraceCalibration c;
  c.data = extract_fit_data(traces, o);
  c.inputs = fit_inputs(c.data, files.empty() ? std::string() : files.front(), fo);
  c.inputs.files.insert(c.inputs.files.end(), files.begin(), files.end());
  return c;
}

HardwareProfile refit_from_traces(const HardwareProfile& base, const TraceCalibration& c, const calib::FitOptions& fo,
                                  calib::FitReport& report) {
  HardwareProfile p = calib::fit_profile(base, c.inputs, fo, report);
  apply_trace_compute(c.data, base.compute, p, report.provenance);
  return p;
}

}  // namespace stepsim::trace
