#pragma once
// The host-only half of live mode: lowering a Program onto GPU operations. Each Program
// instruction becomes an ordered list of GpuCalls that say exactly which CUDA/cuBLASLt/NCCL
// call the live executor (live/live_executor) makes, on which stream, with which sizes.
// Plain C++ (no CUDA header) so the mapping is unit-tested without a GPU; the executor is a
// direct interpreter of this list and decides nothing on its own.
//
// Lowering rules (DESIGN.md sections 1 and 6):
//   Launch      -> for each GemmShape: one cublasLtMatmul (GemmRunner planned once per shape);
//                  attention FLOPs: one batched GEMM of the same FLOPs (see attention_gemm);
//                  memory_bytes (read + write): device-to-device cudaMemcpyAsync of half the
//                  bytes, in chunks of at most LoweringOptions::copy_chunk;
//                  fixed time: a spin kernel that holds the stream for that long.
//                  All on the Launch's stream; the whole list is timed as one op.
//   Collective  -> the NCCL call on the live communicator of the Program communicator, with
//                  nccl-tests sizes for the live communicator's size (CollectiveSizes below),
//                  in place as the frameworks issue them (all-reduce on the bucket / flat
//                  gradient; all-gather and reduce-scatter with nccl-tests' in-place offsets),
//                  all-to-all out of place (NCCL has no in-place all-to-all). In place matters
//                  on one rank: NCCL makes an in-place one-rank collective a no-op and an
//                  out-of-place one a device memcpy (ncclLaunchOneRank), while the simulator
//                  prices a one-rank collective at zero.
//   Record/Wait -> cudaEventRecord / cudaStreamWaitEvent (one CUDA event per Program EventId).
//   HostSync    -> cudaEventSynchronize (event target) / cudaStreamSynchronize (stream target).
//   Alloc       -> cudaMallocFromPoolAsync on the Alloc's stream.
//   Free        -> plain: cudaFreeAsync on the buffer's allocation stream (stream-ordered reuse,
//                  effective at issue as in the caching allocator); with record_streams: an
//                  event is recorded now on the allocation stream and every recorded stream, and
//                  the host calls cudaFreeAsync once all of them have completed, checked before
//                  every later allocation and at the end of the step (exactly the caching
//                  allocator's record_stream/process_events rule; no Program stream waits).
//   HostWork    -> busy-wait on the host thread for the duration.
//   Mark        -> no GPU call; starts a phase for the ops after it.
//
// Communicators (map_communicator): every Program communicator gets its own NCCL communicator
// (ncclCommSplit of the MPI world), so the communicator FIFO of the Program holds on the GPU.
// A communicator spanning the experiment's whole world maps onto the whole MPI world; a smaller
// one of g ranks keeps g ranks (consecutive ranks, or one per node when it spans g nodes), and
// needs g to divide the MPI world size. With one MPI process every communicator has one rank.

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "sim/core/units.hpp"
#include "sim/hardware/collective_model.hpp"
#include "sim/program/program.hpp"

namespace stepsim::live {

// Per-rank NCCL arguments of a collective of S bytes: the nccl-tests convention, defined once
// in sim/hardware/collective_model.hpp (kernels/gpu/nccl_ops uses it too, and the executor
// checks both agree).
using CollectiveSizes = NcclTestsSizes;
inline CollectiveSizes collective_sizes(CollectiveKind kind, std::int64_t bytes, int nranks, Dtype dtype) {
  return nccl_tests_sizes(kind, bytes, nranks, dtype);
}

// One call per kind, each holding only its own arguments; `stream` is the Program stream
// it is enqueued on (host-only calls have none).
namespace calls {

// cublasLtMatmul with the GemmRunner planned for `plan` (index into LoweredProgram::gemm_shapes).
struct Gemm {
  StreamId stream{0};
  int plan = 0;
  GemmShape shape;
  bool from_attention = false;  // the GEMM stands in for attention FLOPs
};

// cudaMemcpyAsync device-to-device, `repeats` times `bytes` (each reads and writes that much).
struct MemoryCopy {
  StreamId stream{0};
  Bytes bytes;
  std::int64_t repeats = 0;
};

// A spin kernel that holds the stream for `duration`.
struct Spin {
  StreamId stream{0};
  Time duration;
};

// ncclAllReduce / ncclAllGather / ... on the live communicator of `comm`.
struct Collective {
  StreamId stream{0};
  CommId comm{0};
  CollectiveKind kind = CollectiveKind::AllReduce;
  Dtype dtype = Dtype::BF16;
  Bytes bytes;                   // the Program collective's S
  CollectiveSizes sizes;         // NCCL arguments for the live communicator's size
  bool in_place = false;         // one buffer (see the Collective rule above)
  std::string name;
};

struct EventRecord {  // cudaEventRecord(event, stream)
  StreamId stream{0};
  EventId event{0};
};

struct StreamWaitEvent {  // cudaStreamWaitEvent(stream, event)
  StreamId stream{0};
  EventId event{0};
};

struct EventSynchronize {  // cudaEventSynchronize(event); `reason` names the framework call
  EventId event{0};
  std::string reason;
};

struct StreamSynchronize {  // cudaStreamSynchronize(stream)
  StreamId stream{0};
  std::string reason;
};

struct MallocAsync {  // cudaMallocFromPoolAsync(bytes, stream)
  StreamId stream{0};
  BufferId buffer{0};
  Bytes bytes;
  MemCategory category = MemCategory::Other;
  std::string name;
};

struct FreeAsync {  // cudaFreeAsync(ptr, stream): stream = the buffer's allocation stream
  StreamId stream{0};
  BufferId buffer{0};
};

// record_stream free: an event recorded on every one of `wait_streams` (the allocation
// stream first, then the recorded streams), then cudaFreeAsync on `stream` (the allocation
// stream) once all of them have completed.
struct DeferredFree {
  StreamId stream{0};
  BufferId buffer{0};
  std::vector<StreamId> wait_streams;
};

struct HostBusyWait {  // the host thread spins for `duration`
  Time duration;
  std::string name;
};

struct Mark {  // no call; with a phase, starts that phase for the ops after it
  std::string name;
  std::optional<Phase> phase;
};

}  // namespace calls

using GpuCall = std::variant<calls::Gemm, calls::MemoryCopy, calls::Spin, calls::Collective, calls::EventRecord,
                             calls::StreamWaitEvent, calls::EventSynchronize, calls::StreamSynchronize, calls::MallocAsync,
                             calls::FreeAsync, calls::DeferredFree, calls::HostBusyWait, calls::Mark>;

// The Program stream a call is enqueued on; none for the host-only calls (EventSynchronize,
// HostBusyWait, Mark).
std::optional<StreamId> stream_of(const GpuCall& c);

// One Program instruction and what it became. `timed` ops (Launch, Collective) get a CUDA
// event pair around all their calls on `stream`.
struct LoweredInstruction {
  std::size_t instruction = 0;
  bool timed = false;
  std::optional<StreamId> stream;  // timed ops: the stream of their calls
  std::vector<GpuCall> calls;
};

// How a Program communicator maps onto the MPI world.
struct LiveComm {
  std::string name;
  int program_ranks = 1;  // CommDecl::ranks
  int ranks = 1;          // size of the live NCCL communicator
  int color = 0;          // ncclCommSplit color / key of this rank
  int key = 0;
};

struct LoweringOptions {
  int experiment_world = 1;  // the world size the Program was built for
  int live_world = 1;        // MPI world size
  int live_rank = 0;         // this process's MPI rank
  Bytes copy_chunk = Bytes::from_mib(256);  // largest single memcpy (bounds scratch memory)
};

struct LoweredProgram {
  std::vector<LoweredInstruction> instructions;  // one per Program instruction, same order
  std::vector<GemmShape> gemm_shapes;            // distinct shapes, planned once each
  std::vector<LiveComm> comms;                   // index = CommId
  // Scratch the executor allocates once (outside the measured pool): the largest GEMM
  // operands (A, B shared read-only; C and workspace per stream), the largest copy per stream,
  // the largest send/receive buffer per communicator.
  std::vector<Bytes> max_gemm_c_bytes_per_stream;  // index = StreamId
  Bytes max_gemm_a_bytes, max_gemm_b_bytes;
  std::vector<Bytes> max_copy_bytes_per_stream;    // index = StreamId
  std::vector<Bytes> max_send_bytes_per_comm, max_recv_bytes_per_comm;  // index = CommId
  bool uses_deferred_free = false;
  int timed_ops = 0;
};

LiveComm map_communicator(const CommDecl& c, const LoweringOptions& o);

// The batched GEMM with the same FLOPs as `flops` of attention: per batch entry
// 2048 x 2048 x 128 (one head of a 2048-token QK^T), batch = round(flops / 2*2048*2048*128),
// at least one. Flash attention runs below GEMM peak; so does a K=128 GEMM.
GemmShape attention_gemm(Flops flops, Dtype dtype);

// Throws std::logic_error on a malformed Program (validate(), sim/program/validate.hpp:
// undeclared stream, free of a buffer that is not live, ...), InputError when a communicator
// cannot be mapped onto the MPI world.
LoweredProgram lower_program(const Program& p, const LoweringOptions& o);

// Bytes of one GEMM operand per the GemmRunner layout (A: m*k, B: n*k, C: m*n per batch
// entry) in the dtype's input/output element size (fp8 inputs are 1 byte, its output bf16).
Bytes gemm_a_bytes(const GemmShape& g);
Bytes gemm_b_bytes(const GemmShape& g);
Bytes gemm_c_bytes(const GemmShape& g);

// "ncclAllReduce", "ncclAllGather", ... (all-to-all: "ncclAlltoAll").
std::string nccl_call_name(CollectiveKind k);

// One line per call: "cublasLtMatmul 4096x4096x4096 x1 bf16 on 'default'".
std::string describe(const GpuCall& c, const Program& p, const LoweredProgram& l);

}  // namespace stepsim::live
