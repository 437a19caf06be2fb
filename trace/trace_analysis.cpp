#include "trace/trace_analysis.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>
#include <unordered_map>

#include <fmt/format.h>

#include "trace/kineto_trace.hpp"
#include "trace/trace_index.hpp"
#include "sim/core/error.hpp"
#include "sim/core/stats.hpp"
#include "sim/hardware/collective_model.hpp"

namespace stepsim::trace {

void parse_step_range(const std::string& text, AnalyzeOptions& out) {
  AnalyzeOptions o = out;  // `out` is left as it was when the text is bad
  o.first_step.reset();
  o.last_step.reset();
  auto bad = [&]() { return InputError("--steps: " + text + ": expected N, A-B, A- or -B (ProfilerStep numbers)"); };
  auto num = [&](const std::string& s) -> std::int64_t {
    // At most 18 digits: always inside int64 (stoll would throw out_of_range on more).
    if (s.empty() || s.size() > 18 || s.find_first_not_of("0123456789") != std::string::npos) throw bad();
    return std::stoll(s);
  };
  auto dash = text.find('-');
  if (dash == std::string::npos) {
    o.first_step = o.last_step = num(text);
    out = o;
    return;
  }
  std::string a = text.substr(0, dash), b = text.substr(dash + 1);
  if (a.empty() && b.empty()) throw bad();
  if (!a.empty()) o.first_step = num(a);
  if (!b.empty()) o.last_step = num(b);
  if (o.first_step && o.last_step && *o.first_step > *o.last_step) throw bad();
  out = o;
}

namespace {

// Busy-time metrics of one step (see the header for the rules).
struct StepOps {
  std::vector<std::size_t> ops;  // indices into gpu_ops
  std::vector<Phase> phase;      // parallel to ops
};

// The pairs of adjacent characters of a text, hashed into 4,096 bits. A text that lacks one pair
// of a substring cannot contain it, so trace_kernel_class searches a kernel's name only for the
// substrings whose every pair it has: most of the fifty it tests occur in no given name, and
// searching long template names for each was a tenth of an analyze of a small trace (34 k
// instructions a name). The answers are the searches' own: the filter only skips searches
// that cannot succeed.
class PairFilter {
 public:
  explicit PairFilter(std::string_view s) {
    for (std::size_t i = 0; i + 1 < s.size(); ++i) {
      const unsigned k = slot(s[i], s[i + 1]);
      bits_[k / 64] |= std::uint64_t{1} << (k % 64);
    }
  }
  bool may_contain(std::string_view x) const {
    for (std::size_t i = 0; i + 1 < x.size(); ++i) {
      const unsigned k = slot(x[i], x[i + 1]);
      if ((bits_[k / 64] >> (k % 64) & 1) == 0) return false;
    }
    return true;
  }

 private:
  static unsigned slot(char a, char b) {
    return (static_cast<unsigned char>(a) * 131u + static_cast<unsigned char>(b)) % 4096u;
  }
  std::array<std::uint64_t, 64> bits_{};
};

}  // namespace

KernelClass trace_kernel_class(const std::string& raw) {
  // ASCII lower case (std::tolower is a call per character, and depends on the locale, which a
  // Python host may set).
  std::string n = raw;
  for (char& c : n)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  const PairFilter pairs(n);
  auto has = [&](std::string_view x) { return pairs.may_contain(x) && n.find(x) != std::string::npos; };
  // Inductor's generated kernels are named after every aten op they fuse, and the name says only
  // what they read or write: in data/traces/modded-nanogpt the attention gate's backward is
  // triton_per_fused__flash_attn_backward__unsafe_view_mul_sigmoid_..._sum_view_8 (51 us, beside
  // FlashAttention-3's own kernels) and relu(x).square()'s backward
  // triton_poi_fused__unsafe_view_mul_nll_loss_forward_pow_relu_threshold_backward_view_5. No
  // generated kernel is an attention kernel, and a pointwise one (triton_poi_) reduces nothing.
  const bool inductor = is_inductor_kernel_name(raw), pointwise = raw.starts_with("triton_poi_");
  // cuDNN's fused attention: cudnn_generated_fort_native_sdpa_* (sdpa's cuDNN backend).
  if (!inductor && (has("flash") || has("fmha") || has("attention") || has("attn_") || has("sdpa"))) return KernelClass::Attention;
  // Layout kernels beside FP8 GEMMs (deepseek-ai/profile-data's H800 trace: a grouped GEMM
  // library's utils::transpose, batched_transpose, per_channel_cast_and_transpose): memory-bound
  // copies, not GEMMs, though a GEMM namespace names some of them.
  if (has("transpose<") && !has("device_kernel")) return KernelClass::Copy;
  // FP8 quantisation and its inverse (per_token_cast_to_fp8, cast_back): elementwise passes.
  if (has("cast_to_fp8") || has("cast_back")) return KernelClass::Elementwise;
  if (has("gemm") || has("cutlass") || has("xmma") || has("cublas") || has("s16816") || has("s1688") || has("splitk"))
    return KernelClass::Gemm;
  // cuBLAS's Hopper kernels carry no GEMM word: nvjet_tst_256x128_64x4_1x2_h_bz_coopA_NNT (bf16),
  // nvjet_qqtst_* / nvjet_rqsss_* (FP8). In data/traces/modded-nanogpt (CUDA 12.6, H100) every one
  // is launched by aten::mm, bmm, baddbmm or _scaled_mm.
  if (n.rfind("nvjet_", 0) == 0) return KernelClass::Gemm;
  // modded-nanogpt's Triton matmuls for Muon's orthogonalization (train_gpt.py, "Triton kernel for
  // symmetric matrix multiplication"): XXT_kernel (A @ A.T), XTX_kernel (A.T @ A), ba_plus_cAA_kernel
  // (beta A + alpha A @ A.T).
  if (n == "xxt_kernel" || n == "xtx_kernel" || n == "ba_plus_caa_kernel") return KernelClass::Gemm;
  if (has("multi_tensor_apply") || has("adam") || has("sgd")) return KernelClass::Optimizer;
  if (has("layer_norm") || has("layernorm") || has("rms") || has("gammabeta") || has("cuapplylayernorm") ||
      has("cucomputegradinput") || has("cucomputepartgradgammabeta") || has("cucomputegradgammabeta"))
    return KernelClass::Norm;
  // Scans (aten::cumsum: tensor_kernel_scan_innermost_dim / _outer_dim) are reduction-like passes.
  if (!pointwise && (has("softmax") || has("reduce_kernel") || has("nll_loss") || has("reduce") || has("tensor_kernel_scan")))
    return KernelClass::Reduction;
  if (has("indexselect") || has("index_select") || has("embedding") || has("indexing_backward") || has("cub::") ||
      has("segment") || has("compute_grad_weight") || has("sum_and_scatter") || has("krn_") || has("index_elementwise"))
    return KernelClass::Embedding;
  if (has("catarraybatchedcopy")) return KernelClass::Copy;
  // Kernels of the deepseek-ai/profile-data H800 step named for what they do, without a library
  // word: its MoE routing's top-k selections (aten's gatherTopK, topk_sum_and_topk_idx) select as
  // reductions do; rotary embedding, SwiGLU and normal_'s random fill are pointwise passes;
  // _copy_tensor_kernel copies.
  if (has("topk")) return KernelClass::Reduction;
  if (has("rotary") || has("swiglu") || has("distribution_elementwise")) return KernelClass::Elementwise;
  if (has("_copy_tensor_kernel")) return KernelClass::Copy;
  if (has("vectorized_elementwise") || has("fused_dropout") || has("cudacodegen") || has("triton_") ||
      has("masked_scale"))
    return KernelClass::Elementwise;
  if (has("elementwise_kernel") || has("unrolled_elementwise")) return KernelClass::ElementwiseStrided;
  return KernelClass::Compute;
}

namespace {

// The main device's GPU ops, grouped by the ProfilerStep span they belong to, each with its
// phase; ops outside every step are counted in a.unattributed_gpu_ops.
std::vector<StepOps> ops_per_step(const KinetoTrace& t, const TraceIndex& idx, int dev, TraceAnalysis& a) {
  std::vector<StepOps> per_step(idx.steps().size());
  for (std::size_t i = 0; i < t.gpu_ops.size(); ++i) {
    const GpuOp& op = t.gpu_ops[i];
    if (op.device != dev) continue;
    auto s = idx.step_of(op);
    if (!s) {
      ++a.unattributed_gpu_ops;
      continue;
    }
    per_step[*s].ops.push_back(i);
    per_step[*s].phase.push_back(idx.phase_of(*s, op));
  }
  return per_step;
}

// Busy time of one step: kernel classes, overlap, idle and the phase split. Returns the
// merged compute intervals (the exposed part of each collective is measured against them).
std::vector<Interval> step_busy_time(const KinetoTrace& t, const CpuSpan& span, const StepOps& so, KernelClassOfName& class_of,
                                      StepAnalysis& st) {
  std::vector<Interval> compute, comm, memops;
  Time win_start = span.start, win_end = span.end;
  Time fwd_end = span.start, bwd_end = span.start;
  for (std::size_t k = 0; k < so.ops.size(); ++k) {
    const GpuOp& op = t.gpu_ops[so.ops[k]];
    Interval iv{op.start, op.end};
    if (op.kind != GpuOp::Kind::Kernel) {
      memops.push_back(iv);
      ++st.memory_ops;
      // Copy-engine ops: their time goes to the copy class, no kernel counted.
      st.classes.rows[static_cast<std::size_t>(KernelClass::Copy)].time += op.end - op.start;
      continue;
    }
    win_start = std::min(win_start, op.start);
    win_end = std::max(win_end, op.end);
    if (op.collective) {
      comm.push_back(iv);
      ++st.collectives;
      st.classes.communication().kernels += 1;
    } else {
      compute.push_back(iv);
      ++st.kernels;
      ClassRow& row = st.classes.rows[static_cast<std::size_t>(class_of(op))];
      row.kernels += 1;
      row.time += op.end - op.start;
    }
    if (so.phase[k] == Phase::Forward) fwd_end = std::max(fwd_end, op.end);
    if (so.phase[k] == Phase::Backward) bwd_end = std::max(bwd_end, op.end);
  }
  Metrics& m = st.metrics;
  st.kernels_end = win_end;
  m.overlap = overlap_metrics(compute, comm, win_start, win_end);
  m.overlap.step_time = span.end - span.start;
  Time busy = m.overlap.compute_time + m.overlap.comm_time - m.overlap.overlapped_comm;
  m.overlap.idle = std::max(Time{}, m.overlap.step_time - busy);
  st.classes.communication().time = m.overlap.comm_time;
  st.classes.idle().time = m.overlap.idle;
  // Phases partition the span (as compute_metrics does for the simulator's timeline). Their ends
  // are GPU times; where the GPU ran the step's kernels behind the host (past the span's end, by
  // `lag`), the ends are taken back by that lag, so a host far ahead (compiled code, CUDA graphs)
  // does not make the whole span forward.
  const Time lag = std::max(Time{}, win_end - span.end);
  fwd_end = std::clamp(fwd_end - lag, span.start, span.end);
  bwd_end = std::clamp(bwd_end - lag, fwd_end, span.end);
  m.forward = fwd_end - span.start;
  m.backward = bwd_end - fwd_end;
  m.optimizer = span.end - bwd_end;
  st.memory_op_time = total_length(merge_intervals(memops));
  return merge_intervals(compute);
}

// The host program's phase at the memory peak (sim/analysis/metrics.hpp). A stepsim trace gives
// each op its issue time and phase: the last op issued at or before the peak decides, as in the
// simulator. A PyTorch trace: the CPU markers (backward / optimizer spans) at the peak's host time.
std::string peak_phase(const KinetoTrace& t, const TraceIndex& idx, int dev, std::size_t step, Time peak_time) {
  if (!t.stepsim_trace) return to_string(idx.kineto_phase(step, peak_time));
  std::string phase = "forward";
  std::optional<Time> last;
  for (const GpuOp& op : t.gpu_ops) {
    if (op.device != dev || !op.issue || *op.issue > peak_time || op.phase < 0) continue;
    if (!last || *op.issue >= *last) {
      last = op.issue;
      phase = t.phase_of(op);
    }
  }
  return phase;
}

// Memory: samples of the rank's device inside the span; the first highest one is the peak.
void step_memory(const KinetoTrace& t, const TraceIndex& idx, int dev, std::size_t step, const CpuSpan& span, Bytes capacity,
                 Metrics& m) {
  const MemSample* peak = nullptr;
  const MemSample* last = nullptr;
  // A stepsim trace holds one step: every sample of its counter belongs to it (the simulator
  // counts all of them, including any recorded before the first host instruction).
  Time mem_lo = t.stepsim_trace ? Time{std::numeric_limits<std::int64_t>::min()} : span.start;
  Time mem_hi = t.stepsim_trace ? Time::infinite() : span.end;
  for (const MemSample* s : idx.memory_in(dev, mem_lo, mem_hi)) {
    // Reserved: Kineto's "Total Reserved" (torch.cuda.memory_reserved() at each allocator
    // event) or stepsim's reserved counter; its highest value is max_memory_reserved().
    m.peak_reserved = std::max(m.peak_reserved, s->reserved);
    if (!s->has_allocated) continue;
    if (!peak || s->total > peak->total) peak = s;
    last = s;
  }
  if (peak) {
    m.peak_memory = peak->total;
    for (const auto& [cat, b] : t.categories_of(*peak)) m.peak_breakdown[cat] = b;
    m.peak_time = peak->time - span.start;
    m.peak_phase = peak_phase(t, idx, dev, step, peak->time);
    m.persistent_memory = last->total;
  }
  m.capacity = capacity;
  // A stepsim trace carries the memory outside PyTorch it counted; a profiler trace has none.
  m.non_pytorch_parts = t.stepsim_non_pytorch;
  for (const auto& p : m.non_pytorch_parts) m.non_pytorch += p.bytes;
  m.fits = capacity.count == 0 || std::max(m.peak_memory, m.peak_reserved) + m.non_pytorch <= capacity;
  m.fits_allocated = capacity.count == 0 || m.peak_memory + m.non_pytorch <= capacity;
}

// Collectives of one step, with their exposed part against the step's merged compute.
void step_collectives(const KinetoTrace& t, const TraceIndex& idx, const CpuSpan& span, const StepOps& so,
                      const std::vector<Interval>& compute_merged, std::vector<CollectiveRecord>& out) {
  for (std::size_t k = 0; k < so.ops.size(); ++k) {
    const GpuOp& op = t.gpu_ops[so.ops[k]];
    if (op.kind != GpuOp::Kind::Kernel || !op.collective) continue;
    CollectiveRecord r = idx.resolve_collective(so.ops[k]);
    r.step = span.step_number;
    r.start = op.start;
    r.duration = op.end - op.start;
    r.exposed = r.duration - intersection_length({Interval{op.start, op.end}}, compute_merged);
    out.push_back(std::move(r));
  }
}

// Collective table: one row per (kind, group size, S, dtype).
std::vector<CollectiveRow> collective_table(const std::vector<CollectiveRecord>& collectives) {
  std::map<std::tuple<int, int, std::int64_t, std::string>, std::vector<const CollectiveRecord*>> groups;
  for (const auto& r : collectives) groups[{static_cast<int>(r.kind), r.group_size, r.bytes.count, r.dtype}].push_back(&r);
  std::vector<CollectiveRow> table;
  for (auto& [key, recs] : groups) {
    CollectiveRow row;
    row.kind = recs.front()->kind;
    row.group_size = recs.front()->group_size;
    row.group_assumed = recs.front()->group_assumed;
    row.bytes = recs.front()->bytes;
    row.dtype = recs.front()->dtype;
    row.count = recs.size();
    std::vector<Time> d;
    for (const auto* r : recs) {
      d.push_back(r->duration);
      row.total += r->duration;
    }
    std::sort(d.begin(), d.end());
    row.min = d.front();
    row.max = d.back();
    // Median: the lower middle for an even count, so it is a measured value.
    row.median = d[(d.size() - 1) / 2];
    if (row.bytes.count > 0 && row.median.ns > 0) {
      row.algbw_gbps = achieved_bandwidth(row.bytes, row.median).gbps();
      row.busbw_gbps = row.algbw_gbps * collective_busbw_factor(row.kind, row.group_size);
    }
    table.push_back(row);
  }
  return table;
}

// The `top` collectives with the most exposed time, ties in start order.
std::vector<CollectiveRecord> most_exposed(std::vector<CollectiveRecord> by_exposed, int top) {
  std::stable_sort(by_exposed.begin(), by_exposed.end(),
                   [](const CollectiveRecord& x, const CollectiveRecord& y) { return x.exposed > y.exposed; });
  if (by_exposed.size() > static_cast<std::size_t>(std::max(top, 0))) by_exposed.resize(static_cast<std::size_t>(std::max(top, 0)));
  return by_exposed;
}

}  // namespace

TraceAnalysis analyze_trace(const KinetoTrace& t, const AnalyzeOptions& o) {
  TraceIndex idx(t);
  TraceAnalysis a;
  a.file = t.file;
  a.rank = t.rank;
  a.world_size = t.world_size;
  int dev = t.main_device();
  for (const auto& d : t.devices)
    if (d.id == dev) a.device = d.name;
  Bytes capacity = t.stepsim_capacity;
  for (const auto& d : t.devices)
    if (d.id == dev) capacity = d.memory;
  if (t.stepsim_trace && a.device.empty()) a.device = t.stepsim_device;
  a.steps_in_trace = idx.steps().size();
  if (idx.steps().empty())
    throw InputError(t.file + ": /traceEvents: no ProfilerStep#N span: expected a trace recorded with a profiler "
                              "schedule (prof.step())");

  const std::vector<StepOps> per_step = ops_per_step(t, idx, dev, a);
  KernelClassOfName class_of(t);
  for (std::size_t si = 0; si < idx.steps().size(); ++si) {
    const CpuSpan& span = *idx.steps()[si];
    if (o.first_step && span.step_number < *o.first_step) continue;
    if (o.last_step && span.step_number > *o.last_step) continue;
    StepAnalysis st;
    st.classes = empty_breakdown();
    st.number = span.step_number;
    st.span_start = span.start;
    st.span_end = span.end;
    const std::vector<Interval> compute_merged = step_busy_time(t, span, per_step[si], class_of, st);
    step_memory(t, idx, dev, si, span, capacity, st.metrics);
    step_collectives(t, idx, span, per_step[si], compute_merged, a.collectives);
    a.steps.push_back(std::move(st));
  }

  for (const CpuSpan* sp : idx.steps()) {
    a.first_step_in_trace = std::min(a.first_step_in_trace.value_or(sp->step_number), sp->step_number);
    a.last_step_in_trace = std::max(a.last_step_in_trace.value_or(sp->step_number), sp->step_number);
  }
  std::vector<Metrics> ms;
  for (const auto& s : a.steps) ms.push_back(s.metrics);
  if (!ms.empty()) a.mean = mean_metrics(ms);
  std::stable_sort(a.collectives.begin(), a.collectives.end(),
                   [](const CollectiveRecord& x, const CollectiveRecord& y) { return x.start < y.start; });
  a.table = collective_table(a.collectives);
  a.top_exposed = most_exposed(a.collectives, o.top_exposed);
  return a;
}

Metrics mean_metrics(const std::vector<Metrics>& v) {
  Metrics m;
  if (v.empty()) return m;
  auto n = static_cast<std::int64_t>(v.size());
  auto avg = [&](auto get) {
    std::int64_t sum = 0;
    for (const auto& x : v) sum += get(x);
    return static_cast<std::int64_t>(std::llround(static_cast<double>(sum) / static_cast<double>(n)));
  };
  m.overlap.step_time = Time{avg([](const Metrics& x) { return x.overlap.step_time.ns; })};
  m.overlap.compute_time = Time{avg([](const Metrics& x) { return x.overlap.compute_time.ns; })};
  m.overlap.comm_time = Time{avg([](const Metrics& x) { return x.overlap.comm_time.ns; })};
  m.overlap.overlapped_comm = Time{avg([](const Metrics& x) { return x.overlap.overlapped_comm.ns; })};
  m.overlap.exposed_comm = Time{avg([](const Metrics& x) { return x.overlap.exposed_comm.ns; })};
  m.overlap.idle = Time{avg([](const Metrics& x) { return x.overlap.idle.ns; })};
  std::int64_t ov = 0, co = 0;
  for (const auto& x : v) {
    ov += x.overlap.overlapped_comm.ns;
    co += x.overlap.comm_time.ns;
  }
  m.overlap.overlap_pct = co > 0 ? 100.0 * static_cast<double>(ov) / static_cast<double>(co) : 0.0;
  if (v.size() == 1) m.overlap.overlap_pct = v.front().overlap.overlap_pct;
  m.forward = Time{avg([](const Metrics& x) { return x.forward.ns; })};
  m.backward = Time{avg([](const Metrics& x) { return x.backward.ns; })};
  m.optimizer = Time{avg([](const Metrics& x) { return x.optimizer.ns; })};
  const Metrics* peak = &v.front();
  for (const auto& x : v)
    if (x.peak_memory > peak->peak_memory) peak = &x;
  m.peak_memory = peak->peak_memory;
  m.peak_breakdown = peak->peak_breakdown;
  m.peak_time = peak->peak_time;
  m.peak_phase = peak->peak_phase;
  m.persistent_memory = v.back().persistent_memory;
  for (const auto& x : v) m.peak_reserved = std::max(m.peak_reserved, x.peak_reserved);
  m.capacity = v.front().capacity;
  m.non_pytorch = v.front().non_pytorch;
  m.non_pytorch_parts = v.front().non_pytorch_parts;
  m.fits_allocated = std::all_of(v.begin(), v.end(), [](const Metrics& x) { return x.fits_allocated; });
  m.fits = std::all_of(v.begin(), v.end(), [](const Metrics& x) { return x.fits; });
  return m;
}

namespace {

// stepsim::median (sim/core/stats.hpp) of times, to the nanosecond.
Time median_time(const std::vector<Time>& v) {
  std::vector<double> ns;
  ns.reserve(v.size());
  for (Time t : v) ns.push_back(static_cast<double>(t.ns));
  return Time{std::llround(median(std::move(ns)))};
}

bool same_collective(const CollectiveRecord& a, const CollectiveRecord& b) {
  return a.kind == b.kind && a.dtype == b.dtype && a.bytes == b.bytes;
}

// RankWaitRow of one step, from each rank's collectives of that step (ranks in job order); none
// where the ranks did not run the same collectives.
std::optional<RankWaitRow> rank_wait(std::int64_t step, const std::vector<std::vector<const CollectiveRecord*>>& per_rank) {
  const auto& first = per_rank.front();
  if (first.empty()) return std::nullopt;
  for (const auto& c : per_rank)
    if (c.size() != first.size() || !std::equal(c.begin(), c.end(), first.begin(), [](auto* x, auto* y) { return same_collective(*x, *y); }))
      return std::nullopt;
  const std::size_t n = first.size();
  std::vector<Time> offset;
  for (const auto& c : per_rank) {
    std::vector<Time> d;
    for (std::size_t i = 0; i < n; ++i) d.push_back((c[i]->start + c[i]->duration) - (first[i]->start + first[i]->duration));
    offset.push_back(median_time(std::move(d)));
  }
  RankWaitRow row;
  row.step = step;
  row.collectives = n;
  std::vector<Time> end_spread;
  for (std::size_t i = 0; i < n; ++i) {
    Time latest = Time{-Time::infinite().ns}, sum{}, end_min = Time::infinite(), end_max = latest;
    for (std::size_t r = 0; r < per_rank.size(); ++r) {
      const Time arrival = per_rank[r][i]->start - offset[r];
      latest = std::max(latest, arrival);
      sum += arrival - first[i]->start;  // relative, so the sum of a few hundred epochs cannot overflow
      end_min = std::min(end_min, arrival + per_rank[r][i]->duration);
      end_max = std::max(end_max, arrival + per_rank[r][i]->duration);
    }
    const Time wait = (latest - first[i]->start) - Time{sum.ns / static_cast<std::int64_t>(per_rank.size())};
    row.wait += wait;
    if (wait > row.largest_wait) {
      row.largest_wait = wait;
      row.largest_index = i;
      row.largest_kind = first[i]->kind;
      row.largest_bytes = first[i]->bytes;
    }
    end_spread.push_back(end_max - end_min);
  }
  row.end_spread = median_time(std::move(end_spread));
  return row;
}

}  // namespace

JobAnalysis analyze_job(const std::vector<KinetoTrace>& traces, const AnalyzeOptions& o) {
  JobAnalysis job;
  for (const auto& t : traces) {
    job.ranks.push_back(analyze_trace(t, o));
    const TraceAnalysis& a = job.ranks.back();
    // A range that selects no step would report (and compare against) a mean of no step: zeros.
    if (a.steps.empty() && a.first_step_in_trace)
      throw InputError(fmt::format("{}: --steps {}-{}: no ProfilerStep in that range: expected steps within the trace's {} to {}",
                                   t.file, o.first_step ? std::to_string(*o.first_step) : "",
                                   o.last_step ? std::to_string(*o.last_step) : "", *a.first_step_in_trace,
                                   *a.last_step_in_trace));
  }
  std::stable_sort(job.ranks.begin(), job.ranks.end(),
                   [](const TraceAnalysis& x, const TraceAnalysis& y) { return x.rank < y.rank; });
  std::map<std::int64_t, std::vector<std::pair<int, const Metrics*>>> by_step;
  for (const auto& r : job.ranks)
    for (const auto& s : r.steps) by_step[s.number].push_back({r.rank, &s.metrics});
  std::vector<Metrics> all;
  for (const auto& [num, list] : by_step) {
    std::vector<Metrics> ms;
    for (const auto& [rank, m] : list) ms.push_back(*m);
    job.steps.push_back({num, mean_metrics(ms)});
    all.push_back(job.steps.back().second);
    if (job.ranks.size() > 1 && list.size() == job.ranks.size()) {
      StragglerRow row;
      row.step = num;
      row.min_step = row.max_step = list.front().second->overlap.step_time;
      Time cmin = Time::infinite(), cmax{-1}, emin = Time::infinite();
      for (const auto& [rank, m] : list) {
        row.min_step = std::min(row.min_step, m->overlap.step_time);
        row.max_step = std::max(row.max_step, m->overlap.step_time);
        if (m->overlap.compute_time > cmax) { cmax = m->overlap.compute_time; row.slowest_compute_rank = rank; }
        cmin = std::min(cmin, m->overlap.compute_time);
        if (m->overlap.exposed_comm < emin) { emin = m->overlap.exposed_comm; row.least_exposed_rank = rank; }
      }
      row.compute_spread = cmax - cmin;
      job.stragglers.push_back(row);
    }
  }
  if (job.ranks.size() > 1)
    for (const auto& row : job.stragglers) {  // the steps present in every trace
      std::vector<std::vector<const CollectiveRecord*>> per_rank;
      for (const auto& r : job.ranks) {
        auto& c = per_rank.emplace_back();
        for (const auto& rec : r.collectives)
          if (rec.step == row.step) c.push_back(&rec);
      }
      if (auto w = rank_wait(row.step, per_rank)) job.rank_waits.push_back(*w);
    }
  // The job mean weighs every step of every rank alike (a single trace: that trace's mean).
  std::vector<Metrics> every;
  for (const auto& r : job.ranks)
    for (const auto& s : r.steps) every.push_back(s.metrics);
  if (!every.empty()) job.mean = mean_metrics(every);
  // The measured wait for the slowest rank goes into the job's metrics as simulate reports it
  // (metrics.rank_wait), so compare can set it beside a prediction: per step where measured, and
  // for the job the mean over those steps.
  Time waits;
  for (const auto& w : job.rank_waits) {
    waits += w.wait;
    for (auto& [n, m] : job.steps)
      if (n == w.step) m.rank_wait = w.wait;
  }
  if (!job.rank_waits.empty()) job.mean.rank_wait = Time{waits.ns / static_cast<std::int64_t>(job.rank_waits.size())};
  return job;
}

}  // namespace stepsim::trace
