#include "live/lowering.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "sim/core/error.hpp"
#include "sim/core/overloaded.hpp"
#include "sim/program/validate.hpp"

namespace stepsim::live {

namespace {

std::int64_t in_elem(Dtype d) { return d == Dtype::FP8 ? 1 : dtype_bytes(d); }
std::int64_t out_elem(Dtype d) { return d == Dtype::FP8 ? 2 : dtype_bytes(d); }

GpuCall make_call(CallKind kind, std::optional<StreamId> stream = std::nullopt) {
  GpuCall c;
  c.kind = kind;
  c.stream = stream;
  return c;
}

// Attention stand-in per batch entry: m = n = 2048, k = 128.
constexpr std::int64_t kAttnM = 2048, kAttnN = 2048, kAttnK = 128;

class Lowerer {
 public:
  Lowerer(const Program& p, const LoweringOptions& o) : p_(p), o_(o) {
    const std::size_t ns = p.streams.size();
    out_.max_gemm_c_bytes_per_stream.assign(ns, Bytes{});
    out_.max_copy_bytes_per_stream.assign(ns, Bytes{});
    out_.max_send_bytes_per_comm.assign(p.comms.size(), Bytes{});
    out_.max_recv_bytes_per_comm.assign(p.comms.size(), Bytes{});
    for (const CommDecl& c : p.comms) out_.comms.push_back(map_communicator(c, o));
    alloc_stream_.assign(p.buffer_count, std::nullopt);
  }

  LoweredProgram run() {
    out_.instructions.reserve(p_.instructions.size());
    for (std::size_t i = 0; i < p_.instructions.size(); ++i) out_.instructions.push_back(lower(i));
    return std::move(out_);
  }

 private:
  int plan_for(const GemmShape& g) {
    auto it = std::find(out_.gemm_shapes.begin(), out_.gemm_shapes.end(), g);
    if (it != out_.gemm_shapes.end()) return static_cast<int>(it - out_.gemm_shapes.begin());
    out_.gemm_shapes.push_back(g);
    out_.max_gemm_a_bytes = std::max(out_.max_gemm_a_bytes, gemm_a_bytes(g));
    out_.max_gemm_b_bytes = std::max(out_.max_gemm_b_bytes, gemm_b_bytes(g));
    return static_cast<int>(out_.gemm_shapes.size() - 1);
  }

  GpuCall gemm_call(StreamId s, const GemmShape& g, bool attention) {
    GpuCall c = make_call(CallKind::Gemm, s);
    c.gemm = g;
    c.gemm_plan = plan_for(g);
    c.from_attention = attention;
    auto& cmax = out_.max_gemm_c_bytes_per_stream[s.index()];
    cmax = std::max(cmax, gemm_c_bytes(g));
    return c;
  }

  // One instruction -> its GPU calls (the Program passed validate(): its ids are declared).
  LoweredInstruction lower(std::size_t i) {
    LoweredInstruction li;
    li.instruction = i;
    std::visit([&](const auto& instr) { lower_instruction(instr, li); }, p_.instructions[i]);
    if (li.timed) ++out_.timed_ops;
    return li;
  }

  // A kernel: its GEMMs (and the attention stand-in), a device copy for its memory traffic, a
  // spin for its fixed time.
  void lower_instruction(const Launch& l, LoweredInstruction& li) {
    li.timed = true;
    li.stream = l.stream;
    const KernelWork& w = l.kernel.work;
    for (const GemmShape& g : w.gemms) li.calls.push_back(gemm_call(l.stream, g, false));
    if (w.attention_flops.count > 0) {
      // Attention GEMMs run in the dtype of the kernel's GEMMs (bf16 when there are none).
      Dtype dt = w.gemms.empty() ? Dtype::BF16 : w.gemms.front().dtype;
      li.calls.push_back(gemm_call(l.stream, attention_gemm(w.attention_flops, dt), true));
    }
    if (w.memory_bytes.count > 0) {
      // memory_bytes counts reads + writes; a copy of N bytes reads N and writes N.
      std::int64_t half = std::max<std::int64_t>(1, (w.memory_bytes.count + 1) / 2);
      std::int64_t chunk = std::max<std::int64_t>(1, o_.copy_chunk.count);
      GpuCall c = make_call(CallKind::MemoryCopy, l.stream);
      c.copy_repeats = (half + chunk - 1) / chunk;
      // Equal chunks (the last one rounds up by < repeats bytes) keep one scratch size.
      c.copy_bytes = Bytes{(half + c.copy_repeats - 1) / c.copy_repeats};
      auto& m = out_.max_copy_bytes_per_stream[l.stream.index()];
      m = std::max(m, c.copy_bytes);
      li.calls.push_back(c);
    }
    if (w.fixed.ns > 0) {
      GpuCall c = make_call(CallKind::Spin, l.stream);
      c.duration = w.fixed;
      li.calls.push_back(c);
    }
  }

  // A collective: in place except all-to-all; the per-communicator scratch grows to its sizes.
  void lower_instruction(const Collective& c, LoweredInstruction& li) {
    li.timed = true;
    li.stream = c.stream;
    GpuCall g = make_call(CallKind::Collective, c.stream);
    g.comm = c.comm;
    g.collective = c.kind;
    g.dtype = c.dtype;
    g.bytes = c.bytes;
    g.name = c.name;
    g.sizes = collective_sizes(c.kind, c.bytes.count, out_.comms[c.comm.index()].ranks, c.dtype);
    g.in_place = c.kind != CollectiveKind::AllToAll;
    const std::size_t ci = c.comm.index();
    out_.max_send_bytes_per_comm[ci] = std::max(out_.max_send_bytes_per_comm[ci], Bytes{g.sizes.send_bytes});
    out_.max_recv_bytes_per_comm[ci] = std::max(out_.max_recv_bytes_per_comm[ci], Bytes{g.sizes.recv_bytes});
    li.calls.push_back(g);
  }

  void lower_instruction(const Record& r, LoweredInstruction& li) { lower_event_call(CallKind::EventRecord, r.stream, r.event, li); }
  void lower_instruction(const Wait& w, LoweredInstruction& li) { lower_event_call(CallKind::StreamWaitEvent, w.stream, w.event, li); }

  // cudaEventRecord / cudaStreamWaitEvent: one call on `stream` naming `event`.
  void lower_event_call(CallKind kind, StreamId stream, EventId event, LoweredInstruction& li) {
    GpuCall g = make_call(kind, stream);
    g.event = event;
    li.calls.push_back(g);
  }

  void lower_instruction(const HostSync& h, LoweredInstruction& li) {
    GpuCall g;
    g.name = h.reason;
    std::visit(Overloaded{
                   [&](EventId e) {
                     g.kind = CallKind::EventSynchronize;
                     g.event = e;
                   },
                   [&](StreamId s) {
                     g.kind = CallKind::StreamSynchronize;
                     g.stream = s;
                   },
               },
               h.target);
    li.calls.push_back(g);
  }

  // An allocation remembers its stream: the free returns the block to that stream's pool.
  void lower_instruction(const Alloc& a, LoweredInstruction& li) {
    alloc_stream_[a.buffer.index()] = a.stream;
    GpuCall g = make_call(CallKind::MallocAsync, a.stream);
    g.buffer = a.buffer;
    g.bytes = a.bytes;
    g.category = a.category;
    g.name = a.name;
    li.calls.push_back(g);
  }

  // A free with record_streams is deferred until every stream that used the block passes it.
  void lower_instruction(const Free& f, LoweredInstruction& li) {
    const std::size_t b = f.buffer.index();
    GpuCall g;
    g.buffer = f.buffer;
    g.stream = alloc_stream_[b];  // validate(): the buffer is live, so it has one
    if (f.record_streams.empty()) {
      g.kind = CallKind::FreeAsync;
    } else {
      g.kind = CallKind::DeferredFree;
      g.wait_streams.push_back(*alloc_stream_[b]);
      for (StreamId s : f.record_streams) {
        if (std::find(g.wait_streams.begin(), g.wait_streams.end(), s) == g.wait_streams.end()) g.wait_streams.push_back(s);
      }
      out_.uses_deferred_free = true;
    }
    alloc_stream_[b].reset();
    li.calls.push_back(g);
  }

  void lower_instruction(const HostWork& h, LoweredInstruction& li) {
    GpuCall g = make_call(CallKind::HostBusyWait);
    g.duration = h.duration;
    g.name = h.name;
    li.calls.push_back(g);
  }

  void lower_instruction(const Mark& m, LoweredInstruction& li) {
    GpuCall g = make_call(CallKind::Mark);
    g.name = m.name;
    g.starts_phase = m.phase.has_value();
    if (m.phase) g.phase = *m.phase;
    li.calls.push_back(g);
  }

  const Program& p_;
  const LoweringOptions& o_;
  LoweredProgram out_;
  std::vector<std::optional<StreamId>> alloc_stream_;  // per buffer, none when not live
};

}  // namespace

std::string to_string(CallKind k) {
  switch (k) {
    case CallKind::Gemm: return "cublasLtMatmul";
    case CallKind::MemoryCopy: return "cudaMemcpyAsync";
    case CallKind::Spin: return "spin_kernel";
    case CallKind::Collective: return "nccl";
    case CallKind::EventRecord: return "cudaEventRecord";
    case CallKind::StreamWaitEvent: return "cudaStreamWaitEvent";
    case CallKind::EventSynchronize: return "cudaEventSynchronize";
    case CallKind::StreamSynchronize: return "cudaStreamSynchronize";
    case CallKind::MallocAsync: return "cudaMallocFromPoolAsync";
    case CallKind::FreeAsync: return "cudaFreeAsync";
    case CallKind::DeferredFree: return "cudaFreeAsync(deferred)";
    case CallKind::HostBusyWait: return "host_busy_wait";
    case CallKind::Mark: return "mark";
  }
  return "mark";
}

LiveComm map_communicator(const CommDecl& c, const LoweringOptions& o) {
  if (o.live_world < 1 || o.live_rank < 0 || o.live_rank >= o.live_world)
    throw std::logic_error(fmt::format("map_communicator: rank {} of world {}", o.live_rank, o.live_world));
  LiveComm lc;
  lc.name = c.name;
  lc.program_ranks = c.ranks;
  lc.key = o.live_rank;
  if (c.ranks >= o.experiment_world || c.ranks >= o.live_world) {
    lc.ranks = o.live_world;
    lc.color = 0;
    return lc;
  }
  const int g = std::max(1, c.ranks);
  if (o.live_world % g != 0)
    throw InputError(fmt::format("communicator '{}' has {} ranks, which does not divide the MPI world size {}: run "
                                 "under mpirun -np with a multiple of {}",
                                 c.name, g, o.live_world, g));
  lc.ranks = g;
  // One rank per node (the inter-node replicate group of HSDP): ranks with the same position
  // in their block of live_world / g consecutive ranks. Otherwise blocks of g consecutive ranks
  // (torchrun puts a node's ranks next to each other).
  const bool one_per_node = c.nodes > 1 && c.nodes == c.ranks;
  lc.color = one_per_node ? o.live_rank % (o.live_world / g) : o.live_rank / g;
  return lc;
}

GemmShape attention_gemm(Flops flops, Dtype dtype) {
  const double unit = 2.0 * kAttnM * kAttnN * kAttnK;
  GemmShape g;
  g.m = kAttnM;
  g.n = kAttnN;
  g.k = kAttnK;
  g.batch = std::max<std::int64_t>(1, std::llround(flops.count / unit));
  g.dtype = dtype;
  return g;
}

LoweredProgram lower_program(const Program& p, const LoweringOptions& o) {
  validate(p);
  return Lowerer(p, o).run();
}

Bytes gemm_a_bytes(const GemmShape& g) { return Bytes{g.m * g.k * g.batch * in_elem(g.dtype)}; }
Bytes gemm_b_bytes(const GemmShape& g) { return Bytes{g.n * g.k * g.batch * in_elem(g.dtype)}; }
Bytes gemm_c_bytes(const GemmShape& g) { return Bytes{g.m * g.n * g.batch * out_elem(g.dtype)}; }

std::string nccl_call_name(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::AllReduce: return "ncclAllReduce";
    case CollectiveKind::AllGather: return "ncclAllGather";
    case CollectiveKind::ReduceScatter: return "ncclReduceScatter";
    case CollectiveKind::Broadcast: return "ncclBroadcast";
    case CollectiveKind::Reduce: return "ncclReduce";
    case CollectiveKind::AllToAll: return "ncclAlltoAll";
  }
  return "ncclAllReduce";
}

std::string describe(const GpuCall& c, const Program& p, const LoweredProgram& l) {
  auto stream = [&](std::optional<StreamId> s) {
    return s && s->index() < p.streams.size() ? "'" + p.streams[s->index()].name + "'" : std::string("(none)");
  };
  switch (c.kind) {
    case CallKind::Gemm:
      return fmt::format("cublasLtMatmul {}x{}x{} x{} {}{} on {}", c.gemm.m, c.gemm.n, c.gemm.k, c.gemm.batch,
                         to_string(c.gemm.dtype), c.from_attention ? " (attention)" : "", stream(c.stream));
    case CallKind::MemoryCopy:
      return fmt::format("cudaMemcpyAsync D2D {} B x{} on {}", c.copy_bytes.count, c.copy_repeats, stream(c.stream));
    case CallKind::Spin: return fmt::format("spin_kernel {} ns on {}", c.duration.ns, stream(c.stream));
    case CallKind::Collective: {
      const LiveComm& lc = l.comms.at(c.comm.value().index());
      return fmt::format("{} count={} {} send={} B recv={} B{} on comm '{}' ({} of {} program ranks) on {}",
                         nccl_call_name(c.collective), c.sizes.count, to_string(c.dtype), c.sizes.send_bytes,
                         c.sizes.recv_bytes, c.in_place ? " in place" : "", lc.name, lc.ranks, lc.program_ranks,
                         stream(c.stream));
    }
    case CallKind::EventRecord: return fmt::format("cudaEventRecord event {} on {}", c.event.value(), stream(c.stream));
    case CallKind::StreamWaitEvent: return fmt::format("cudaStreamWaitEvent {} waits event {}", stream(c.stream), c.event.value());
    case CallKind::EventSynchronize: return fmt::format("cudaEventSynchronize event {} ({})", c.event.value(), c.name);
    case CallKind::StreamSynchronize: return fmt::format("cudaStreamSynchronize {} ({})", stream(c.stream), c.name);
    case CallKind::MallocAsync:
      return fmt::format("cudaMallocFromPoolAsync {} B '{}' ({}) on {}", c.bytes.count, c.name, to_string(c.category),
                         stream(c.stream));
    case CallKind::FreeAsync: return fmt::format("cudaFreeAsync buffer {} on {}", c.buffer.value(), stream(c.stream));
    case CallKind::DeferredFree: {
      std::string ws;
      for (StreamId s : c.wait_streams) ws += (ws.empty() ? "" : ", ") + stream(s);
      return fmt::format("cudaEventRecord on {}, then cudaFreeAsync buffer {} on {} once they complete", ws, c.buffer.value(),
                         stream(c.stream));
    }
    case CallKind::HostBusyWait: return fmt::format("host busy-wait {} ns ({})", c.duration.ns, c.name);
    case CallKind::Mark: return fmt::format("mark '{}'", c.name);
  }
  return "?";
}

}  // namespace stepsim::live
