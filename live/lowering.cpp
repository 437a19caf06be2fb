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

  calls::Gemm gemm_call(StreamId s, const GemmShape& g, bool attention) {
    auto& cmax = out_.max_gemm_c_bytes_per_stream[s.index()];
    cmax = std::max(cmax, gemm_c_bytes(g));
    return calls::Gemm{s, plan_for(g), g, attention};
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
    const KernelWork& w = *l.kernel.work;
    for (const GemmShape& g : w.gemms) li.calls.push_back(gemm_call(l.stream, g, false));
    if (w.attention.flops.count > 0) {
      // Attention GEMMs run in the dtype of the kernel's GEMMs (bf16 when there are none), over the
      // FLOPs the kernel executes (its compiled head width).
      Dtype dt = w.gemms.empty() ? Dtype::BF16 : w.gemms.front().dtype;
      li.calls.push_back(gemm_call(l.stream, attention_gemm(attention_executed_flops(w.attention), dt), true));
    }
    if (w.memory_bytes.count > 0) {
      // memory_bytes counts reads + writes; a copy of N bytes reads N and writes N.
      std::int64_t half = std::max<std::int64_t>(1, (w.memory_bytes.count + 1) / 2);
      std::int64_t chunk = std::max<std::int64_t>(1, o_.copy_chunk.count);
      calls::MemoryCopy c{l.stream, Bytes{}, (half + chunk - 1) / chunk};
      // Equal chunks (the last one rounds up by < repeats bytes) keep one scratch size.
      c.bytes = Bytes{(half + c.repeats - 1) / c.repeats};
      auto& m = out_.max_copy_bytes_per_stream[l.stream.index()];
      m = std::max(m, c.bytes);
      li.calls.push_back(c);
    }
    if (w.fixed.ns > 0) li.calls.push_back(calls::Spin{l.stream, w.fixed});
  }

  // A collective: in place except all-to-all; the per-communicator scratch grows to its sizes.
  void lower_instruction(const Collective& c, LoweredInstruction& li) {
    li.timed = true;
    li.stream = c.stream;
    calls::Collective g{c.stream,
                        c.comm,
                        c.kind,
                        c.dtype,
                        c.bytes,
                        collective_sizes(c.kind, c.bytes.count, out_.comms[c.comm.index()].ranks, c.dtype),
                        c.kind != CollectiveKind::AllToAll,
                        c.name.str()};
    const std::size_t ci = c.comm.index();
    out_.max_send_bytes_per_comm[ci] = std::max(out_.max_send_bytes_per_comm[ci], Bytes{g.sizes.send_bytes});
    out_.max_recv_bytes_per_comm[ci] = std::max(out_.max_recv_bytes_per_comm[ci], Bytes{g.sizes.recv_bytes});
    li.calls.push_back(g);
  }

  void lower_instruction(const Record& r, LoweredInstruction& li) { li.calls.push_back(calls::EventRecord{r.stream, r.event}); }
  void lower_instruction(const Wait& w, LoweredInstruction& li) { li.calls.push_back(calls::StreamWaitEvent{w.stream, w.event}); }

  void lower_instruction(const HostSync& h, LoweredInstruction& li) {
    li.calls.push_back(std::visit(Overloaded{
                                      [&](EventId e) -> GpuCall { return calls::EventSynchronize{e, h.reason.str()}; },
                                      [&](StreamId s) -> GpuCall { return calls::StreamSynchronize{s, h.reason.str()}; },
                                  },
                                  h.target));
  }

  // An allocation remembers its stream: the free returns the block to that stream's pool.
  void lower_instruction(const Alloc& a, LoweredInstruction& li) {
    alloc_stream_[a.buffer.index()] = a.stream;
    li.calls.push_back(calls::MallocAsync{a.stream, a.buffer, a.bytes, a.category, a.name.str()});
  }

  // A free with record_streams is deferred until every stream that used the block passes it.
  void lower_instruction(const Free& f, LoweredInstruction& li) {
    const std::size_t b = f.buffer.index();
    const StreamId stream = alloc_stream_[b].value();  // validate(): the buffer is live, so it has one
    alloc_stream_[b].reset();
    if (f.record_streams.empty()) {
      li.calls.push_back(calls::FreeAsync{stream, f.buffer});
      return;
    }
    calls::DeferredFree g{stream, f.buffer, {stream}};
    for (StreamId s : f.record_streams) {
      if (std::find(g.wait_streams.begin(), g.wait_streams.end(), s) == g.wait_streams.end()) g.wait_streams.push_back(s);
    }
    out_.uses_deferred_free = true;
    li.calls.push_back(std::move(g));
  }

  void lower_instruction(const HostWork& h, LoweredInstruction& li) { li.calls.push_back(calls::HostBusyWait{h.duration, h.name}); }
  void lower_instruction(const Mark& m, LoweredInstruction& li) { li.calls.push_back(calls::Mark{m.name, m.phase}); }

  const Program& p_;
  const LoweringOptions& o_;
  LoweredProgram out_;
  std::vector<std::optional<StreamId>> alloc_stream_;  // per buffer, none when not live
};

}  // namespace

std::optional<StreamId> stream_of(const GpuCall& c) {
  return std::visit(Overloaded{
                        [](const calls::EventSynchronize&) -> std::optional<StreamId> { return std::nullopt; },
                        [](const calls::HostBusyWait&) -> std::optional<StreamId> { return std::nullopt; },
                        [](const calls::Mark&) -> std::optional<StreamId> { return std::nullopt; },
                        [](const auto& on_stream) -> std::optional<StreamId> { return on_stream.stream; },
                    },
                    c);
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

std::string describe(const GpuCall& call, const Program& p, const LoweredProgram& l) {
  auto stream = [&](StreamId s) {
    return s.index() < p.streams.size() ? "'" + p.streams[s.index()].name + "'" : std::string("(none)");
  };
  return std::visit(
      Overloaded{
          [&](const calls::Gemm& c) {
            return fmt::format("cublasLtMatmul {}x{}x{} x{} {}{} on {}", c.shape.m, c.shape.n, c.shape.k, c.shape.batch,
                               to_string(c.shape.dtype), c.from_attention ? " (attention)" : "", stream(c.stream));
          },
          [&](const calls::MemoryCopy& c) {
            return fmt::format("cudaMemcpyAsync D2D {} B x{} on {}", c.bytes.count, c.repeats, stream(c.stream));
          },
          [&](const calls::Spin& c) { return fmt::format("spin_kernel {} ns on {}", c.duration.ns, stream(c.stream)); },
          [&](const calls::Collective& c) {
            const LiveComm& lc = l.comms.at(c.comm.index());
            return fmt::format("{} count={} {} send={} B recv={} B{} on comm '{}' ({} of {} program ranks) on {}",
                               nccl_call_name(c.kind), c.sizes.count, to_string(c.dtype), c.sizes.send_bytes,
                               c.sizes.recv_bytes, c.in_place ? " in place" : "", lc.name, lc.ranks, lc.program_ranks,
                               stream(c.stream));
          },
          [&](const calls::EventRecord& c) { return fmt::format("cudaEventRecord event {} on {}", c.event, stream(c.stream)); },
          [&](const calls::StreamWaitEvent& c) {
            return fmt::format("cudaStreamWaitEvent {} waits event {}", stream(c.stream), c.event);
          },
          [&](const calls::EventSynchronize& c) { return fmt::format("cudaEventSynchronize event {} ({})", c.event, c.reason); },
          [&](const calls::StreamSynchronize& c) {
            return fmt::format("cudaStreamSynchronize {} ({})", stream(c.stream), c.reason);
          },
          [&](const calls::MallocAsync& c) {
            return fmt::format("cudaMallocFromPoolAsync {} B '{}' ({}) on {}", c.bytes.count, c.name, to_string(c.category),
                               stream(c.stream));
          },
          [&](const calls::FreeAsync& c) { return fmt::format("cudaFreeAsync buffer {} on {}", c.buffer, stream(c.stream)); },
          [&](const calls::DeferredFree& c) {
            std::string ws;
            for (StreamId s : c.wait_streams) ws += (ws.empty() ? "" : ", ") + stream(s);
            return fmt::format("cudaEventRecord on {}, then cudaFreeAsync buffer {} on {} once they complete", ws, c.buffer,
                               stream(c.stream));
          },
          [&](const calls::HostBusyWait& c) { return fmt::format("host busy-wait {} ns ({})", c.duration.ns, c.name); },
          [&](const calls::Mark& c) { return fmt::format("mark '{}'", c.name); },
      },
      call);
}

}  // namespace stepsim::live
