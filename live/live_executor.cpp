#include "live/live_executor.hpp"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <variant>

#include <fmt/format.h>

#include "kernels/gpu/gemm.hpp"
#include "live/live_spin.hpp"
#include "kernels/gpu/nccl_ops.hpp"
#include "sim/exec/engine.hpp"

namespace stepsim::gpu {

namespace {

using Clock = std::chrono::steady_clock;

// A stream-ordered memory pool on one device (move-only owner). The release threshold keeps
// freed memory reserved between steps; reuse that would make one stream wait on another's
// free is disabled (the caching allocator never does that), reuse of memory whose free has
// already completed on the GPU is allowed (what record_stream frees amount to).
class MemPool {
 public:
  explicit MemPool(int device) {
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.handleTypes = cudaMemHandleTypeNone;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device;
    STEPSIM_CUDA_CHECK(cudaMemPoolCreate(&pool_, &props));
    std::uint64_t threshold = std::numeric_limits<std::uint64_t>::max();
    STEPSIM_CUDA_CHECK(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &threshold));
    int off = 0;
    STEPSIM_CUDA_CHECK(cudaMemPoolSetAttribute(pool_, cudaMemPoolReuseAllowInternalDependencies, &off));
  }
  ~MemPool() {
    if (pool_) (void)cudaMemPoolDestroy(pool_);
  }
  MemPool(const MemPool&) = delete;
  MemPool& operator=(const MemPool&) = delete;

  cudaMemPool_t get() const { return pool_; }
  void reset_high_water_marks() const {
    std::uint64_t zero = 0;
    STEPSIM_CUDA_CHECK(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrUsedMemHigh, &zero));
    STEPSIM_CUDA_CHECK(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReservedMemHigh, &zero));
  }
  Bytes attribute(cudaMemPoolAttr a) const {
    std::uint64_t v = 0;
    STEPSIM_CUDA_CHECK(cudaMemPoolGetAttribute(pool_, a, &v));
    return Bytes{static_cast<std::int64_t>(v)};
  }

 private:
  cudaMemPool_t pool_ = nullptr;
};

Time elapsed(const Event& from, const Event& to) {
  return Time{std::llround(static_cast<double>(Event::elapsed_ms(from, to)) * 1e6)};
}

std::string version_string(int v, int major_div) {
  // CUDA: 1000*major + 10*minor; NCCL >= 2.9: 10000*major + 100*minor + patch.
  if (major_div == 1000) return fmt::format("{}.{}", v / 1000, (v % 1000) / 10);
  return fmt::format("{}.{}.{}", v / 10000, (v % 10000) / 100, v % 100);
}

}  // namespace

nlohmann::json live_versions() {
  int rt = 0, drv = 0, nccl = 0, mpi_v = 0, mpi_sv = 0;
  STEPSIM_CUDA_CHECK(cudaRuntimeGetVersion(&rt));
  STEPSIM_CUDA_CHECK(cudaDriverGetVersion(&drv));
  STEPSIM_NCCL_CHECK(ncclGetVersion(&nccl));
  MPI_Get_version(&mpi_v, &mpi_sv);
  char lib[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  MPI_Get_library_version(lib, &len);
  std::string library(lib, static_cast<std::size_t>(std::max(0, len)));
  if (auto nl = library.find('\n'); nl != std::string::npos) library.resize(nl);
  return {{"cuda_runtime", version_string(rt, 1000)},
          {"cuda_driver", version_string(drv, 1000)},
          {"nccl", version_string(nccl, 10000)},
          {"mpi", fmt::format("{}.{}", mpi_v, mpi_sv)},
          {"mpi_library", library}};
}

struct LiveExecutor::Impl {
  const Program& p;
  const live::LoweredProgram& l;
  const MpiSession& mpi;
  DeviceInfo info;

  std::vector<Stream> streams;            // index = StreamId
  std::vector<Event> prog_events;         // index = EventId, ordering only
  std::vector<Event> op_start, op_end;    // index = timed op, timing
  Event step_start;
  std::vector<Event> stream_end;          // index = StreamId
  std::vector<Event> free_events;         // record_stream free points, reused every step
  std::shared_ptr<TextPool> label_text = std::make_shared<TextPool>();
  std::vector<Text> host_labels;          // index = instruction, in label_text (precomputed: no formatting while timing)

  CublasLtHandle cublas;
  std::vector<GemmRunner> runners;        // index = gemm plan
  DeviceBuffer gemm_a, gemm_b;
  std::vector<DeviceBuffer> gemm_c, workspace, copy_src, copy_dst;  // index = StreamId
  std::vector<NcclComm> comms;            // index = CommId
  std::vector<DeviceBuffer> coll_send, coll_recv;                   // index = CommId

  MemPool pool;
  std::vector<void*> buffer_ptr;          // index = BufferId, null when not live

  struct PendingFree {
    BufferId buffer{0};
    StreamId stream{0};
    std::vector<std::size_t> events;      // into free_events
  };
  std::vector<PendingFree> pending;
  std::size_t free_events_used = 0;

  Impl(const Program& prog, const live::LoweredProgram& low, const MpiSession& m, const NcclComm& world)
      : p(prog), l(low), mpi(m), info(current_device_info()), pool(info.ordinal) {
    create_streams_and_events();
    for (std::size_t i = 0; i < p.instructions.size(); ++i) host_labels.push_back(label_text->add(describe(p, i)));
    buffer_ptr.assign(p.buffer_count, nullptr);
    plan_gemms_and_copies();
    create_communicators(world);
    check_collective_sizes();
    STEPSIM_CUDA_CHECK(cudaDeviceSynchronize());
  }

  // One CUDA stream per Program stream, one event per Program event, a timing pair per timed
  // op, an end event per stream, and the events of every record_stream free of a step.
  void create_streams_and_events() {
    for (const auto& s : p.streams) streams.emplace_back(s.priority);
    for (std::size_t e = 0; e < p.event_count; ++e) prog_events.emplace_back(false);
    for (int k = 0; k < l.timed_ops; ++k) {
      op_start.emplace_back(true);
      op_end.emplace_back(true);
    }
    for (std::size_t s = 0; s < p.streams.size(); ++s) stream_end.emplace_back(true);
    std::size_t n_free_events = 0;
    for (const auto& li : l.instructions)
      for (const auto& c : li.calls)
        if (const auto* f = std::get_if<live::calls::DeferredFree>(&c)) n_free_events += f->wait_streams.size();
    for (std::size_t k = 0; k < n_free_events; ++k) free_events.emplace_back(false);
  }

  // GEMM plans (one per distinct shape) and operands filled with finite non-zero values; the
  // per-stream GEMM output, workspace and copy scratch.
  void plan_gemms_and_copies() {
    runners.reserve(l.gemm_shapes.size());
    std::size_t ws_bytes = 0;
    for (const auto& g : l.gemm_shapes) {
      runners.emplace_back(cublas, g);
      ws_bytes = std::max(ws_bytes, runners.back().workspace_bytes());
    }
    const cudaStream_t s0 = streams.at(0).get();
    std::size_t elem = l.gemm_shapes.empty() ? 2 : gemm_input_elem_bytes(l.gemm_shapes.front().dtype);
    if (l.max_gemm_a_bytes.count > 0) {
      gemm_a = DeviceBuffer(static_cast<std::size_t>(l.max_gemm_a_bytes.count));
      gemm_a.fill_random(elem, 1, s0);
    }
    if (l.max_gemm_b_bytes.count > 0) {
      gemm_b = DeviceBuffer(static_cast<std::size_t>(l.max_gemm_b_bytes.count));
      gemm_b.fill_random(elem, 2, s0);
    }
    for (std::size_t s = 0; s < p.streams.size(); ++s) {
      auto c = static_cast<std::size_t>(l.max_gemm_c_bytes_per_stream.at(s).count);
      gemm_c.emplace_back(c);
      workspace.emplace_back(c > 0 ? ws_bytes : 0);
      auto cp = static_cast<std::size_t>(l.max_copy_bytes_per_stream.at(s).count);
      copy_src.emplace_back(cp);
      copy_dst.emplace_back(cp);
      if (cp > 0) copy_src.back().fill_random(4, 10 + s, s0);
    }
  }

  // One NCCL communicator per Program communicator: ncclCommSplit is collective over the
  // world, so every rank creates them in the same order. Per communicator: a send buffer for
  // out-of-place calls and a receive buffer that also holds the in-place calls (their one
  // buffer is the larger side: S bytes).
  void create_communicators(const NcclComm& world) {
    for (const auto& lc : l.comms) {
      comms.push_back(split_comm(world, lc.color, lc.key));
      if (!comms.back() || comms.back().size() != lc.ranks)
        throw std::runtime_error(fmt::format("communicator '{}': ncclCommSplit gave {} ranks, the lowering expects {}", lc.name,
                                             comms.back() ? comms.back().size() : 0, lc.ranks));
    }
    const cudaStream_t s0 = streams.at(0).get();
    for (std::size_t c = 0; c < l.comms.size(); ++c) {
      const auto send = static_cast<std::size_t>(l.max_send_bytes_per_comm.at(c).count);
      const auto recv = static_cast<std::size_t>(l.max_recv_bytes_per_comm.at(c).count);
      coll_send.emplace_back(send);
      coll_recv.emplace_back(std::max(send, recv));
      if (coll_send.back().bytes() > 0) coll_send.back().fill_random(2, 100 + c, s0);
      if (coll_recv.back().bytes() > 0) coll_recv.back().fill_random(2, 200 + c, s0);
    }
  }

  // The lowering's sizes must be exactly what nccl_ops computes for the live communicator.
  void check_collective_sizes() const {
    for (const auto& li : l.instructions)
      for (const auto& call : li.calls) {
        const auto* c = std::get_if<live::calls::Collective>(&call);
        if (!c) continue;
        const NcclComm& comm = comms.at(c->comm.index());
        CollectiveSizes g = collective_sizes(c->kind, static_cast<std::size_t>(c->bytes.count), comm.size(), c->dtype);
        if (static_cast<std::int64_t>(g.count) != c->sizes.count || static_cast<std::int64_t>(g.send_bytes) != c->sizes.send_bytes ||
            static_cast<std::int64_t>(g.recv_bytes) != c->sizes.recv_bytes)
          throw std::logic_error(fmt::format("instruction {}: lowered collective sizes disagree with nccl_ops", li.instruction));
      }
  }

  cudaStream_t stream(StreamId s) const { return streams.at(s.index()).get(); }
  // A timed op's stream; only the lowering's Launch and Collective have one.
  cudaStream_t stream(std::optional<StreamId> s) const { return stream(s.value()); }
  Time since(Clock::time_point t0) const {
    return Time{std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count()};
  }

  // Frees every record_stream'ed buffer whose recorded work has completed (the caching
  // allocator's process_events), stamping the change with the host time it was observed.
  void process_pending_frees(live::MeasuredStep& m, Clock::time_point t0) {
    for (auto it = pending.begin(); it != pending.end();) {
      bool done = true;
      for (std::size_t e : it->events) {
        cudaError_t q = cudaEventQuery(free_events[e].get());
        if (q == cudaErrorNotReady) {
          done = false;
          break;
        }
        if (q != cudaSuccess) throw_cuda_error(q, "cudaEventQuery(record_stream event)", __FILE__, __LINE__);
      }
      if (!done) {
        ++it;
        continue;
      }
      void*& ptr = buffer_ptr.at(it->buffer.index());
      if (ptr) STEPSIM_CUDA_CHECK(cudaFreeAsync(ptr, stream(it->stream)));
      ptr = nullptr;
      m.memory.push_back({since(t0), it->buffer, false});
      it = pending.erase(it);
    }
  }

  // What the calls of one step share: its measurements, its host clock origin, and what the
  // host is doing during the current instruction (issuing, blocked, busy).
  struct StepState {
    live::MeasuredStep& m;
    Clock::time_point t0;
    HostInterval::Kind kind = HostInterval::Kind::Issue;
  };

  // One call of the lowering, exactly as it says (live/lowering.hpp).
  void execute(const live::calls::Gemm& c, StepState&) {
    const std::size_t s = c.stream.index();
    runners.at(static_cast<std::size_t>(c.plan)).run(stream(c.stream), gemm_a.data(), gemm_b.data(), gemm_c.at(s).data(),
                                                     workspace.at(s));
  }
  void execute(const live::calls::MemoryCopy& c, StepState&) {
    const std::size_t s = c.stream.index();
    for (std::int64_t r = 0; r < c.repeats; ++r)
      STEPSIM_CUDA_CHECK(cudaMemcpyAsync(copy_dst[s].data(), copy_src[s].data(), static_cast<std::size_t>(c.bytes.count),
                                         cudaMemcpyDeviceToDevice, stream(c.stream)));
  }
  void execute(const live::calls::Spin& c, StepState&) {
    STEPSIM_CUDA_CHECK(launch_live_spin(stream(c.stream), static_cast<unsigned long long>(c.duration.ns)));
  }
  void execute(const live::calls::Collective& c, StepState&) {
    const std::size_t ci = c.comm.index();
    CollectiveSizes s;
    s.count = static_cast<std::size_t>(c.sizes.count);
    s.send_bytes = static_cast<std::size_t>(c.sizes.send_bytes);
    s.recv_bytes = static_cast<std::size_t>(c.sizes.recv_bytes);
    s.total_bytes = static_cast<std::size_t>(c.sizes.total_bytes);
    if (c.in_place) {
      CollectivePointers in = in_place_pointers(c.kind, s, c.dtype, comms[ci].rank(), coll_recv[ci].data());
      run_collective(comms[ci], stream(c.stream), c.kind, s, c.dtype, in.send, in.recv);
    } else {
      run_collective(comms[ci], stream(c.stream), c.kind, s, c.dtype, coll_send[ci].data(), coll_recv[ci].data());
    }
  }
  void execute(const live::calls::EventRecord& c, StepState&) { prog_events.at(c.event.index()).record(stream(c.stream)); }
  void execute(const live::calls::StreamWaitEvent& c, StepState&) {
    STEPSIM_CUDA_CHECK(cudaStreamWaitEvent(stream(c.stream), prog_events.at(c.event.index()).get(), 0));
  }
  void execute(const live::calls::EventSynchronize& c, StepState& st) {
    st.kind = HostInterval::Kind::Blocked;
    prog_events.at(c.event.index()).synchronize();
  }
  void execute(const live::calls::StreamSynchronize& c, StepState& st) {
    st.kind = HostInterval::Kind::Blocked;
    STEPSIM_CUDA_CHECK(cudaStreamSynchronize(stream(c.stream)));
  }
  void execute(const live::calls::MallocAsync& c, StepState& st) {
    process_pending_frees(st.m, st.t0);
    void* ptr = nullptr;
    if (c.bytes.count > 0)
      STEPSIM_CUDA_CHECK(cudaMallocFromPoolAsync(&ptr, static_cast<std::size_t>(c.bytes.count), pool.get(), stream(c.stream)));
    buffer_ptr.at(c.buffer.index()) = ptr;
    st.m.memory.push_back({since(st.t0), c.buffer, true});
  }
  void execute(const live::calls::FreeAsync& c, StepState& st) {
    void*& ptr = buffer_ptr.at(c.buffer.index());
    if (ptr) STEPSIM_CUDA_CHECK(cudaFreeAsync(ptr, stream(c.stream)));
    ptr = nullptr;
    st.m.memory.push_back({since(st.t0), c.buffer, false});
  }
  void execute(const live::calls::DeferredFree& c, StepState&) {
    PendingFree pf{c.buffer, c.stream, {}};
    for (StreamId s : c.wait_streams) {
      std::size_t e = free_events_used++;
      free_events.at(e).record(stream(s));
      pf.events.push_back(e);
    }
    pending.push_back(std::move(pf));
  }
  void execute(const live::calls::HostBusyWait& c, StepState& st) {
    st.kind = HostInterval::Kind::Work;
    const auto until = Clock::now() + std::chrono::nanoseconds(c.duration.ns);
    while (Clock::now() < until) {
    }
  }
  void execute(const live::calls::Mark& c, StepState& st) { st.m.marks.push_back(PhaseMark{c.name, since(st.t0)}); }

  live::MeasuredStep run_step() {
    STEPSIM_CUDA_CHECK(cudaDeviceSynchronize());
    mpi.barrier();
    pool.reset_high_water_marks();
    pending.clear();
    free_events_used = 0;
    live::MeasuredStep m;
    m.text = label_text;
    const Clock::time_point t0 = Clock::now();
    step_start.record(stream(StreamId{0}));
    for (std::size_t s = 1; s < streams.size(); ++s) STEPSIM_CUDA_CHECK(cudaStreamWaitEvent(streams[s].get(), step_start.get(), 0));
    std::size_t timed = 0;
    Time host_end;
    for (const auto& li : l.instructions) {
      const Time h0 = since(t0);
      StepState st{m, t0};
      if (li.timed) op_start[timed].record(stream(li.stream));
      for (const auto& c : li.calls) std::visit([&](const auto& call) { execute(call, st); }, c);
      if (li.timed) {
        op_end[timed].record(stream(li.stream));
        m.ops.push_back(live::MeasuredOp{li.instruction, h0, {}, {}});
        ++timed;
      }
      host_end = since(t0);
      m.host.push_back(HostInterval{st.kind, HostInterval::Label::Text, static_cast<std::uint32_t>(li.instruction), host_labels[li.instruction], h0, host_end});
    }
    for (std::size_t s = 0; s < streams.size(); ++s) stream_end[s].record(streams[s].get());
    for (auto& e : stream_end) e.synchronize();
    process_pending_frees(m, t0);  // everything recorded has completed now
    if (!pending.empty()) throw std::logic_error("record_stream frees still pending after the step synchronised");

    m.end = host_end;
    for (const auto& e : stream_end) m.end = std::max(m.end, elapsed(step_start, e));
    for (std::size_t k = 0; k < m.ops.size(); ++k) {
      m.ops[k].start = elapsed(step_start, op_start[k]);
      m.ops[k].end = elapsed(step_start, op_end[k]);
    }
    m.pool_used_high = pool.attribute(cudaMemPoolAttrUsedMemHigh);
    m.pool_reserved_high = pool.attribute(cudaMemPoolAttrReservedMemHigh);
    // Persistent buffers (weights, optimizer state) are allocated again by the next step's
    // setup, as in the simulated step: free what is still live, outside the measurement.
    for (void*& ptr : buffer_ptr)
      if (ptr) {
        STEPSIM_CUDA_CHECK(cudaFreeAsync(ptr, stream(StreamId{0})));
        ptr = nullptr;
      }
    STEPSIM_CUDA_CHECK(cudaStreamSynchronize(stream(StreamId{0})));
    return m;
  }
};

LiveExecutor::LiveExecutor(const Program& program, const live::LoweredProgram& lowered, const MpiSession& mpi,
                           const NcclComm& world)
    : impl_(std::make_unique<Impl>(program, lowered, mpi, world)) {}

LiveExecutor::~LiveExecutor() = default;

live::LiveRun LiveExecutor::run(const LiveOptions& o) {
  if (o.steps < 1 || o.warmup < 0) throw std::invalid_argument("LiveExecutor::run: steps >= 1 and warmup >= 0");
  live::LiveRun r;
  for (int i = 0; i < o.warmup; ++i) (void)impl_->run_step();
  for (int i = 0; i < o.steps; ++i) {
    live::MeasuredStep m = impl_->run_step();
    // The step of a data-parallel job lasts as long as its slowest rank.
    double slowest = impl_->mpi.max_over_ranks(static_cast<double>(m.end.ns));
    r.step_times.push_back(Time{std::llround(slowest)});
    r.steps.push_back(std::move(m));
  }
  r.warmup = o.warmup;
  r.mpi_world = impl_->mpi.size();
  r.device = impl_->info.name;
  r.capacity = Bytes{static_cast<std::int64_t>(impl_->info.memory_bytes)};
  r.comms = impl_->l.comms;
  r.versions = live_versions();
  r.gemm_plans = impl_->runners.size();
  return r;
}

}  // namespace stepsim::gpu
