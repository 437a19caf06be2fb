#include "kernels/gpu/bench.hpp"

#include <algorithm>
#include <cmath>
#include <ostream>

#include <fmt/format.h>

#include "kernels/gpu/cuda_check.hpp"
#include "kernels/gpu/membw_kernels.hpp"
#include "kernels/gpu/nccl_ops.hpp"
#include "sim/hardware/collective_model.hpp"

namespace stepsim::gpu {

Timing summarize(std::vector<double> v) {
  Timing t;
  if (v.empty()) return t;
  std::sort(v.begin(), v.end());
  auto at = [&](double q) { return v[static_cast<std::size_t>(std::lround(q * static_cast<double>(v.size() - 1)))]; };
  t.median_us = v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  t.p10_us = at(0.1);
  t.p90_us = at(0.9);
  return t;
}

namespace {

// Times `repeats` loops of `iters` calls of `launch(i)` on `stream`; returns mean us per call per loop.
template <class F>
std::vector<double> time_loops(const TimingOptions& o, const Stream& stream, F&& launch) {
  for (int i = 0; i < o.warmup; ++i) launch(i);
  stream.synchronize();
  Event start, stop;
  std::vector<double> per_loop;
  for (int r = 0; r < o.repeats; ++r) {
    start.record(stream.get());
    for (int i = 0; i < o.iters; ++i) launch(i);
    stop.record(stream.get());
    stop.synchronize();
    per_loop.push_back(1e3 * Event::elapsed_ms(start, stop) / o.iters);
  }
  return per_loop;
}

// Calls `launch` back to back, `batch` at a time, until `ms` of GPU time has passed (or a cap
// on the rounds, for a device whose events report no time); returns the GPU time it ran.
template <class F>
double run_for(double ms, int batch, const Stream& stream, F&& launch) {
  constexpr int kMaxRounds = 1'000'000;
  Event start, stop;
  double elapsed = 0;
  for (int round = 0; elapsed < ms && round < kMaxRounds; ++round) {
    start.record(stream.get());
    for (int i = 0; i < batch; ++i) launch(i);
    stop.record(stream.get());
    stop.synchronize();
    elapsed += Event::elapsed_ms(start, stop);
  }
  return elapsed;
}

struct GemmOperands {
  std::vector<DeviceBuffer> a, b;
  DeviceBuffer c, workspace;
};

GemmOperands make_operands(const GemmRunner& g, const GemmBenchOptions& o, const Stream& stream) {
  DeviceInfo info = current_device_info();
  std::size_t rotate = o.rotate_bytes ? o.rotate_bytes : std::max<std::size_t>(4 * info.l2_bytes, std::size_t{64} << 20);
  std::size_t per_set = g.a_bytes() + g.b_bytes();
  // Enough operand sets that one full rotation exceeds `rotate`, bounded by a quarter of memory.
  std::size_t sets = std::clamp<std::size_t>((rotate + per_set - 1) / per_set, 1, 64);
  while (sets > 1 && sets * per_set > info.memory_bytes / 4) --sets;
  GemmOperands ops;
  std::size_t elem = gemm_input_elem_bytes(g.shape().dtype);
  for (std::size_t s = 0; s < sets; ++s) {
    ops.a.emplace_back(g.a_bytes()).fill_random(elem, 2 * s + 1, stream.get());
    ops.b.emplace_back(g.b_bytes()).fill_random(elem, 2 * s + 2, stream.get());
  }
  ops.c = DeviceBuffer(g.c_bytes());
  ops.workspace = DeviceBuffer(g.workspace_bytes());
  return ops;
}

std::string time_str(double us) {
  if (us >= 10000) return fmt::format("{:7.0f}", us);
  if (us >= 100) return fmt::format("{:7.1f}", us);
  return fmt::format("{:7.2f}", us);
}

const char* type_name(Dtype d) {
  switch (d) {
    case Dtype::FP32: case Dtype::TF32: return "float";
    case Dtype::BF16: return "bfloat16";
    case Dtype::FP16: return "half";
    case Dtype::FP8: return "f8e4m3";
  }
  return "float";
}

const char* redop_name(CollectiveKind k) {
  return k == CollectiveKind::AllReduce || k == CollectiveKind::ReduceScatter || k == CollectiveKind::Reduce ? "sum" : "none";
}

}  // namespace

GemmBenchResult bench_gemm(const CublasLtHandle& handle, const GemmShape& shape, const GemmBenchOptions& o,
                           const Stream& stream) {
  GemmRunner g(handle, shape, o.workspace_bytes);
  GemmOperands ops = make_operands(g, o, stream);
  const std::size_t sets = ops.a.size();
  auto call = [&](int i) {
    std::size_t s = static_cast<std::size_t>(i) % sets;
    g.run(stream.get(), ops.a[s].data(), ops.b[s].data(), ops.c.data(), ops.workspace);
  };
  const double sustained = o.sustain_ms > 0 ? run_for(o.sustain_ms, std::max(1, o.timing.iters), stream, call) : 0;
  auto loops = time_loops(o.timing, stream, call);
  GemmBenchResult r;
  r.sustained_ms = sustained;
  r.shape = shape;
  r.timing = summarize(loops);
  r.tflops = shape.flops().count / (r.timing.median_us * 1e-6) / 1e12;
  r.algo = g.algo_description();
  return r;
}

void print_nccl_tests_header(std::ostream& out, const NcclBenchOptions& o, int nranks) {
  out << fmt::format("# nThread 1 nGpus 1 minBytes {} maxBytes {} step: {}(factor) warmup iters: {} iters: {} agg iters: 1 "
                     "validation: 0 graph: 0\n#\n# ranks: {}, timed loops per size: {} (time = median loop mean, max over "
                     "ranks)\n#\n",
                     o.min_bytes, o.max_bytes, o.factor, o.timing.warmup, o.timing.iters, nranks, o.timing.repeats);
  out << "#                                                              out-of-place                       in-place          \n"
         "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
         "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       \n";
}

std::vector<NcclBenchRow> bench_collective(const MpiSession& mpi, const NcclComm& comm, CollectiveKind kind,
                                           const NcclBenchOptions& o, const Stream& stream, std::ostream* print) {
  std::vector<NcclBenchRow> rows;
  const int n = comm.size();
  const std::size_t elem = nccl_elem_bytes(o.dtype);
  for (double s = static_cast<double>(o.min_bytes); s <= static_cast<double>(o.max_bytes) * 1.0000001;
       s = o.factor > 1 ? s * o.factor : s + static_cast<double>(elem)) {
    CollectiveSizes sizes = collective_sizes(kind, static_cast<std::size_t>(s), n, o.dtype);
    if (!rows.empty() && sizes.total_bytes == rows.back().bytes) continue;  // rounding gave the same size
    CollectiveBuffers buf(sizes, o.dtype, stream.get(), 1000 + rows.size());
    NcclBenchRow row;
    row.kind = kind;
    row.bytes = sizes.total_bytes;
    row.count = sizes.count;
    auto oop = time_loops(o.timing, stream, [&](int) {
      run_collective(comm, stream.get(), kind, sizes, o.dtype, buf.send.data(), buf.recv.data());
    });
    for (auto& t : oop) t = mpi.max_over_ranks(t);
    row.out_of_place = summarize(oop);
    if (kind != CollectiveKind::AllToAll) {
      // In place as nccl-tests does it: AG in its output buffer, the others in their input.
      CollectivePointers in = in_place_pointers(kind, sizes, o.dtype, comm.rank(),
                                                kind == CollectiveKind::AllGather ? buf.recv.data() : buf.send.data());
      auto ip = time_loops(o.timing, stream, [&](int) { run_collective(comm, stream.get(), kind, sizes, o.dtype, in.send, in.recv); });
      for (auto& t : ip) t = mpi.max_over_ranks(t);
      row.in_place = summarize(ip);
    }
    if (print) {
      double factor = busbw_factor(kind, n);
      auto group = [&](const Timing& t) {
        if (t.median_us <= 0) return fmt::format("  {:>7}  {:>6}  {:>6}  {:>5}", "N/A", "N/A", "N/A", "N/A");
        double algbw = static_cast<double>(row.bytes) / (t.median_us * 1e3);
        return fmt::format("  {}  {:6.2f}  {:6.2f}  {:>5}", time_str(t.median_us), algbw, algbw * factor, "N/A");
      };
      int root = kind == CollectiveKind::Broadcast || kind == CollectiveKind::Reduce ? 0 : -1;
      *print << fmt::format("{:12}  {:12}  {:>8}  {:>6}  {:6}", row.bytes, row.count, type_name(o.dtype), redop_name(kind), root)
             << group(row.out_of_place) << group(row.in_place) << "\n";
      print->flush();
    }
    rows.push_back(row);
  }
  return rows;
}

calib::ContentionSample bench_contention(const MpiSession& mpi, const NcclComm& comm, const CublasLtHandle& handle,
                                         const ContentionOptions& o) {
  Stream compute, comm_stream;
  GemmRunner g(handle, o.gemm);
  GemmBenchOptions gopt;
  gopt.timing = o.timing;
  GemmOperands ops = make_operands(g, gopt, compute);
  CollectiveSizes sizes = collective_sizes(o.kind, o.bytes, comm.size(), Dtype::BF16);
  CollectiveBuffers buf(sizes, Dtype::BF16, comm_stream.get(), 77);
  const std::size_t sets = ops.a.size();
  auto gemm_call = [&](int i) {
    std::size_t s = static_cast<std::size_t>(i) % sets;
    g.run(compute.get(), ops.a[s].data(), ops.b[s].data(), ops.c.data(), ops.workspace);
  };
  auto comm_call = [&](int) { run_collective(comm, comm_stream.get(), o.kind, sizes, Dtype::BF16, buf.send.data(), buf.recv.data()); };
  calib::ContentionSample out;
  out.gemm_alone = Time::from_us(summarize(time_loops(o.timing, compute, gemm_call)).median_us);
  std::vector<double> c_alone = time_loops(o.timing, comm_stream, comm_call);
  for (auto& t : c_alone) t = mpi.max_over_ranks(t);
  out.comm_alone = Time::from_us(summarize(c_alone).median_us);
  // Concurrent: both loops enqueued together, each timed on its own stream. The shorter loop is
  // repeated so that it overlaps the other for its whole duration.
  const int gemm_per_comm = std::max(1, static_cast<int>(std::lround(out.comm_alone.us() / std::max(1.0, out.gemm_alone.us()))));
  std::vector<double> g_conc, c_conc;
  Event g0, g1, c0, c1;
  for (int w = 0; w < o.timing.warmup; ++w) gemm_call(w), comm_call(w);
  compute.synchronize();
  comm_stream.synchronize();
  for (int r = 0; r < o.timing.repeats; ++r) {
    mpi.barrier();
    g0.record(compute.get());
    c0.record(comm_stream.get());
    for (int i = 0; i < o.timing.iters; ++i) {
      comm_call(i);
      for (int j = 0; j < gemm_per_comm; ++j) gemm_call(i * gemm_per_comm + j);
    }
    g1.record(compute.get());
    c1.record(comm_stream.get());
    g1.synchronize();
    c1.synchronize();
    g_conc.push_back(1e3 * Event::elapsed_ms(g0, g1) / (o.timing.iters * gemm_per_comm));
    c_conc.push_back(mpi.max_over_ranks(1e3 * Event::elapsed_ms(c0, c1) / o.timing.iters));
  }
  out.gemm_concurrent = Time::from_us(summarize(g_conc).median_us);
  out.comm_concurrent = Time::from_us(summarize(c_conc).median_us);
  out.source = "stepsim calibrate contention";
  return out;
}

calib::CollectiveSeries to_series(const std::vector<NcclBenchRow>& rows, int ranks, int nodes, const std::string& label) {
  calib::CollectiveSeries s;
  s.label = label;
  s.ranks = ranks;
  s.nodes = nodes;
  if (!rows.empty()) s.kind = rows.front().kind;
  for (const auto& r : rows) {
    s.samples.push_back({Bytes{static_cast<std::int64_t>(r.bytes)}, Time::from_us(r.out_of_place.median_us), false, 0});
    if (r.in_place.median_us > 0)
      s.samples.push_back({Bytes{static_cast<std::int64_t>(r.bytes)}, Time::from_us(r.in_place.median_us), true, 0});
  }
  return s;
}

namespace {

// One kernel of each memory-bound class over the row's buffers (the copy's source and
// destination pairs, `bytes` each, as bf16): `a` rotates through the sources, `out` through the
// destinations, `b` is a second source (elementwise), gamma and beta (norm) or random row ids
// (embedding) of its own.
void bench_membw_classes(const MembwOptions& o, const Stream& stream, const std::vector<DeviceBuffer>& src,
                         const std::vector<DeviceBuffer>& dst, MembwRow& r) {
  const std::size_t n = r.bytes / 2;
  if (n == 0 || n % (std::size_t{1} << 19) != 0) return;  // the kernels' row and block sizes
  const std::size_t pairs = src.size();
  for (MembwClass c : kMembwClasses) {
    DeviceBuffer b(membw_b_bytes(c, n));
    if (c == MembwClass::Embedding) STEPSIM_CUDA_CHECK(launch_membw_ids(b.data(), n, 7, stream.get()));
    else if (b.bytes() > 0) b.fill_random(2, 99, stream.get());
    const Timing t = summarize(time_loops(o.timing, stream, [&](int i) {
      const auto k = static_cast<std::size_t>(i) % pairs;
      // The elementwise second input rotates with the first when there are two pairs or more.
      const void* second = c == MembwClass::Elementwise && pairs > 1 ? src[(k + 1) % pairs].data() : b.data();
      STEPSIM_CUDA_CHECK(launch_membw(c, MembwArgs{src[k].data(), second, dst[k].data(), n}, stream.get()));
    }));
    if (t.median_us > 0)
      r.class_gbps.emplace_back(membw_class_name(c), static_cast<double>(membw_bytes(c, n)) / (t.median_us * 1e3));
  }
}

}  // namespace

std::vector<MembwRow> bench_membw(const MembwOptions& o, const Stream& stream) {
  DeviceInfo info = current_device_info();
  const std::size_t rotate = std::max<std::size_t>(4 * info.l2_bytes, std::size_t{64} << 20);
  std::vector<MembwRow> rows;
  for (double size = static_cast<double>(o.min_bytes); size <= static_cast<double>(o.max_bytes) * (1 + 1e-9);
       size *= o.factor) {
    const std::size_t bytes = static_cast<std::size_t>(size);
    // Source/destination pairs so one rotation exceeds `rotate`, within a quarter of memory.
    std::size_t pairs = std::clamp<std::size_t>((rotate + 2 * bytes - 1) / (2 * bytes), 1, 16);
    while (pairs > 1 && 2 * pairs * bytes > info.memory_bytes / 4) --pairs;
    if (2 * pairs * bytes > info.memory_bytes / 4) break;
    std::vector<DeviceBuffer> src, dst;
    for (std::size_t i = 0; i < pairs; ++i) {
      src.emplace_back(bytes).fill_random(4, 2 * i + 1, stream.get());
      dst.emplace_back(bytes);
    }
    MembwRow r;
    r.bytes = bytes;
    r.copy = summarize(time_loops(o.timing, stream, [&](int i) {
      const auto k = static_cast<std::size_t>(i) % pairs;
      STEPSIM_CUDA_CHECK(cudaMemcpyAsync(dst[k].data(), src[k].data(), bytes, cudaMemcpyDeviceToDevice, stream.get()));
    }));
    r.set = summarize(time_loops(o.timing, stream, [&](int i) {
      STEPSIM_CUDA_CHECK(cudaMemsetAsync(dst[static_cast<std::size_t>(i) % pairs].data(), 0, bytes, stream.get()));
    }));
    if (r.copy.median_us > 0) r.copy_gbps = 2.0 * static_cast<double>(bytes) / (r.copy.median_us * 1e3);
    if (r.set.median_us > 0) r.set_gbps = static_cast<double>(bytes) / (r.set.median_us * 1e3);
    bench_membw_classes(o, stream, src, dst, r);
    rows.push_back(r);
    if (o.factor <= 1) break;
  }
  return rows;
}

}  // namespace stepsim::gpu
