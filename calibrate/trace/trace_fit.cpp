#include "calibrate/trace/trace_fit.hpp"

#include <algorithm>
#include <cctype>
#include <unordered_map>

#include <fmt/format.h>

#include "calibrate/trace/trace_index.hpp"

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

}  // namespace

std::string kernel_class_of(const std::string& raw) {
  std::string n = raw;
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (is_nccl_kernel_name(raw)) return "collective";
  if (contains(n, "flash") || contains(n, "fmha") || contains(n, "attention")) return "attention";
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

TraceFitData extract_fit_data(const std::vector<KinetoTrace>& traces, const AnalyzeOptions& o) {
  TraceFitData d;
  std::map<std::string, std::vector<Time>> by_class;
  std::map<GemmShape, std::vector<Time>> by_shape;
  for (const KinetoTrace& t : traces) {
    TraceAnalysis a = analyze_trace(t, o);
    for (const CollectiveRecord& r : a.collectives) {
      auto kind = to_collective_kind(r.kind);
      if (!kind || r.bytes.count <= 0 || r.group_size <= 0) {
        ++d.skipped_collectives;
        continue;
      }
      d.collectives.push_back(TraceCollectivePoint{*kind, r.group_size, r.group_assumed, r.bytes, r.duration, r.dtype,
                                                   "", t.rank, r.step});
    }

    TraceIndex idx(t);
    int dev = t.main_device();
    for (const GpuOp& op : t.gpu_ops) {
      if (op.device != dev || op.collective) continue;
      auto s = idx.step_of(op);
      if (!s || !selected(idx.steps()[*s]->step_number, o)) continue;
      std::string cls = op.kind == GpuOp::Kind::Memcpy   ? "memcpy"
                        : op.kind == GpuOp::Kind::Memset ? "memset"
                                                         : kernel_class_of(t.name_of(op));
      by_class[cls].push_back(op.end - op.start);
    }

    // GEMMs: the kernels launched inside each aten::mm/addmm/bmm/baddbmm call (same thread).
    std::unordered_map<std::int64_t, const GpuOp*> by_corr;
    for (const GpuOp& op : t.gpu_ops)
      if (op.correlation >= 0 && op.kind == GpuOp::Kind::Kernel && !op.collective) by_corr.emplace(op.correlation, &op);
    std::map<std::int64_t, std::vector<const RuntimeCall*>> launches;  // thread -> by start
    for (const RuntimeCall& r : t.runtime)
      if (by_corr.count(r.correlation)) launches[r.thread].push_back(&r);
    for (auto& [th, v] : launches)
      std::stable_sort(v.begin(), v.end(), [](const RuntimeCall* a, const RuntimeCall* b) { return a->start < b->start; });
    for (const CpuSpan& span : t.cpu) {
      if (span.kind != CpuSpan::Kind::Gemm) continue;
      GemmShape shape;
      if (!gemm_shape(t.names[static_cast<std::size_t>(span.name)], span.input_dims, shape)) continue;
      std::string dt = canonical_dtype(span.input_type);
      if (dt == "bf16") shape.dtype = Dtype::BF16;
      else if (dt == "fp16") shape.dtype = Dtype::FP16;
      else if (dt == "fp32") shape.dtype = Dtype::FP32;
      else continue;
      auto it = launches.find(span.thread);
      if (it == launches.end()) continue;
      const auto& v = it->second;
      auto lo = std::lower_bound(v.begin(), v.end(), span.start,
                                 [](const RuntimeCall* r, Time x) { return r->start < x; });
      Time total;
      const GpuOp* first = nullptr;
      for (; lo != v.end() && (*lo)->start <= span.end; ++lo) {
        const GpuOp* k = by_corr.at((*lo)->correlation);
        if (!first) first = k;
        total += k->end - k->start;
      }
      if (!first) continue;
      auto s = idx.step_of(*first);
      if (!s || !selected(idx.steps()[*s]->step_number, o)) continue;
      if (total.ns > 0) by_shape[shape].push_back(total);
    }
  }
  for (auto& [cls, v] : by_class) {
    KernelClassTiming k;
    k.cls = cls;
    k.count = v.size();
    for (Time x : v) k.total += x;
    k.median = median_of(v);
    d.kernel_classes.push_back(k);
  }
  for (auto& [shape, v] : by_shape) {
    GemmPoint g;
    g.shape = shape;
    g.count = v.size();
    g.median = median_of(v);
    g.rate = FlopRate{shape.flops().count / g.median.seconds()};
    d.gemms.push_back(g);
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
      s.samples.push_back(calib::CollectiveSample{Bytes{bytes}, o.use_min ? times.front() : times[times.size() / 2], false, 0});
    }
    in.collectives.push_back(std::move(s));
  }
  for (const auto& g : d.gemms) in.gemm.push_back(calib::GemmSample{g.shape, g.rate, -1, label});
  return in;
}

}  // namespace stepsim::trace
