#pragma once
// A PyTorch profiler (Kineto) / Chrome trace, reduced to the records `analyze` and `fit` need.
// The reader (kineto_reader.cpp) streams the JSON through JsonStream (json_stream.hpp) and keeps
// only these compact records, never the document: memory is a few dozen bytes per GPU op, runtime
// call and CPU operator (32 bytes each for the operators), plus one copy of each distinct name.
//
// Times are integer nanoseconds on the trace's own clock (Kineto: microseconds since the epoch
// or since an arbitrary base, converted exactly from the decimal text; stepsim's own traces:
// microseconds with 3 decimals, i.e. exact ns).

#include <cstdint>
#include <filesystem>
#include <istream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/core/non_pytorch_part.hpp"
#include "sim/core/units.hpp"
#include "sim/program/program.hpp"

namespace stepsim::trace {

// Collective kinds as they appear in traces (a superset of the simulator's CollectiveKind:
// point-to-point and all-to-all show up as SendRecv kernels).
enum class TraceCollective { AllReduce, AllGather, ReduceScatter, Broadcast, Reduce, AllToAll, SendRecv, Unknown };
std::string to_string(TraceCollective k);

// Collective parameters as recorded by the trace (kernel args of newer PyTorch, or the
// enclosing record_param_comms / nccl:* CPU op). Element counts are per rank, as PyTorch
// records them; -1 = not recorded.
struct CommParams {
  TraceCollective kind = TraceCollective::Unknown;
  std::int64_t in_elems = -1;
  std::int64_t out_elems = -1;
  int elem_bytes = 0;         // 0 = unknown
  std::string dtype;          // as the trace spells it ("BFloat16", "c10::BFloat16", "float", "bf16")
  int group_size = 0;         // 0 = not recorded
  std::string group_name;     // process group name, "" if not recorded
  std::int64_t bytes = -1;    // stepsim traces: S per the nccl-tests convention, already computed
};

// One per GPU kernel, memcpy and memset: 5,000 in each copy of the ZeRO-1 trace, 160,000 in a
// 1 GB trace, so 88 bytes: what only collectives or stepsim traces carry (their parameters, the
// phase's text) is held once in KinetoTrace (comm_of, phase_of), not in every op.
struct GpuOp {
  enum class Kind : std::uint8_t { Kernel, Memcpy, Memset };
  Kind kind = Kind::Kernel;
  bool collective = false;        // an NCCL kernel or args.stepsim_op == "collective"
  int name = 0;                   // index into KinetoTrace::names
  int device = 0;
  int comm = -1;                  // collectives: index into KinetoTrace::comms; -1 otherwise
  int phase = -1;                 // args.phase (stepsim traces): index into KinetoTrace::names; -1: none
  std::int64_t stream = 0;
  Time start, end;
  std::int64_t correlation = -1;  // -1 = none (stepsim traces have none)
  std::int64_t bytes = 0;         // memcpy/memset payload
  std::int64_t ctas = 0;          // kernels: the CTAs of args.grid (0 = not recorded)
  std::optional<Time> issue;      // args.issue_ns (stepsim traces): when the host issued it
};
static_assert(sizeof(GpuOp) <= 88, "GpuOp grew: see its comment");

// A CUDA runtime/driver call that has a correlation id (cudaLaunchKernel, cudaMemcpyAsync, ...).
struct RuntimeCall {
  std::int64_t correlation = 0;
  std::int64_t thread = 0;   // (pid, tid) folded into one id
  Time start, end;
  int name = -1;             // index into KinetoTrace::names ("cudaLaunchKernel", "cudaStreamSynchronize", ...)
};

// Every CPU operator event (Kineto category "cpu_op" or "Operator": aten ops, autograd nodes,
// record_function ranges recorded as ops), reduced to its name and span: what the host was
// running when it launched a GPU op (analyze --idle).
struct HostOp {
  int name = 0;              // index into KinetoTrace::names
  std::int64_t thread = 0;
  Time start, end;
};

// What a GEMM or attention op recorded of its inputs (CpuSpan::inputs).
struct OpInputs {
  std::vector<std::vector<std::int64_t>> dims;  // the op's Input Dims
  std::string type;                             // its first input's type
};

// CPU spans the analysis needs: 64 bytes; what only collective calls or GEMM and attention ops
// carry is held once in KinetoTrace (comm_of, inputs_of).
struct CpuSpan {
  // MonitorWrite: DeepSpeed's MonitorMaster.write_events, a python_function event
  // ("deepspeed/monitor/monitor.py(46): write_events"), kept when the trace has Python stacks.
  // RunBackward: torch.autograd.backward's call into the engine, the python_function
  // "<built-in method run_backward of torch._C._EngineBase object at 0x...>" (Python stacks).
  enum class Kind { Step, CommOp, Optimizer, Backward, Gemm, Attention, MonitorWrite, RunBackward };
  Kind kind = Kind::Step;
  std::int64_t thread = 0;
  Time start, end;
  std::int64_t step_number = -1;  // Step: N of ProfilerStep#N
  int comm = -1;                  // CommOp: what record_param_comms / nccl:* says (KinetoTrace::comms)
  bool comm_has_params = false;   // CommOp: sizes or kind were recorded
  int inputs = -1;                // Gemm, Attention: KinetoTrace::inputs
  int name = 0;                   // index into names
};
static_assert(sizeof(CpuSpan) <= 64, "CpuSpan grew: see its comment");

// A memory-bound aten op whose recorded shapes give its traffic (memory_op_bytes), kept for
// `fit --trace`'s class bandwidths: 56 bytes, the shapes themselves are not kept.
struct MemoryOpSpan {
  std::int64_t thread = 0;
  Time start, end;
  std::int64_t bytes = 0;     // read + written
  std::int64_t elements = 0;  // computed (memory_op_traffic)
  int name = 0;               // index into names
  bool casts = false;         // mixed-dtype tensor inputs (memory_op_traffic)
  std::int64_t largest = 0;   // its largest tensor's bytes (memory_op_traffic)
};
static_assert(sizeof(MemoryOpSpan) <= 56, "MemoryOpSpan grew: see its comment");

// A live-bytes sample: Kineto "[memory]" instant events (Total Allocated on a CUDA device, and
// Total Reserved: the caching allocator's segments, c10::reportMemoryUsageToProfiler) or a
// stepsim memory counter track ("memory (bytes)", and "memory reserved (bytes)" whose samples
// carry only `reserved`).
// 56 bytes (10,000 in each copy of the ZeRO-1 trace): a counter track's series are held once in
// KinetoTrace (categories_of).
struct MemSample {
  Time time;
  int device = 0;
  // Counter tracks: every series but "total" by name (a stepsim trace's categories), an index into
  // KinetoTrace::categories; -1 for Kineto's "[memory]" events, which carry no categories.
  int categories = -1;
  Bytes total;
  Bytes reserved;            // 0 when the event does not carry it
  bool has_allocated = true; // false: a reserved-only sample (stepsim's reserved counter)
  // Kineto "[memory]" events: the block's address and size, negative for a free ("Addr",
  // "Bytes"); 0 when absent (stepsim counters, older traces).
  std::int64_t addr = 0;
  std::int64_t block_bytes = 0;
};
static_assert(sizeof(MemSample) <= 56, "MemSample grew: see its comment");
using MemCategories = std::vector<std::pair<std::string, Bytes>>;

struct DeviceInfo {
  int id = 0;
  std::string name;
  Bytes memory;
  int sms = 0;
  int compute_major = 0, compute_minor = 0;
};

// The largest distributedInfo.world_size a trace may declare (the experiment's limit, 2^20).
inline constexpr int kMaxTraceWorldSize = 1 << 20;

struct KinetoTrace {
  std::string file;
  int rank = -1;           // distributedInfo.rank, -1 if absent
  int world_size = 0;      // distributedInfo.world_size (1 to kMaxTraceWorldSize), 0 if absent
  std::string backend;
  std::vector<DeviceInfo> devices;
  bool stepsim_trace = false;   // written by `stepsim simulate --trace` (has a "stepsim" object)
  std::string stepsim_device;   // its "stepsim": {"device": ...}
  Bytes stepsim_capacity;       // its "stepsim": {"memory_capacity_bytes": ...}, 0 if absent
  std::vector<NonPytorchPart> stepsim_non_pytorch;  // its "stepsim": {"non_pytorch_breakdown": {name: bytes}}
  std::vector<std::string> names;  // interned names: kernels, ops, runtime calls, stepsim phases
  std::vector<GpuOp> gpu_ops;
  std::vector<CommParams> comms;   // what each collective kernel's args or call recorded (GpuOp::comm, CpuSpan::comm)
  std::vector<OpInputs> inputs;    // GEMM and attention ops' inputs (CpuSpan::inputs)
  std::vector<MemCategories> categories;  // counter samples' series (MemSample::categories)
  std::vector<RuntimeCall> runtime;
  std::vector<CpuSpan> cpu;
  std::vector<HostOp> host_ops;    // in file order; empty unless ReadOptions::host_ops
  // Python frames (Kineto category "python_function", recorded with with_stack=True): what the
  // training loop ran where no operator did (analyze --idle's head and tail). In file order;
  // empty unless ReadOptions::host_ops.
  std::vector<HostOp> python_ops;
  std::vector<MemoryOpSpan> memory_ops;  // in file order
  std::vector<MemSample> memory;
  std::int64_t event_count = 0;  // every traceEvents entry seen

  const std::string& name_of(const GpuOp& op) const { return names[static_cast<std::size_t>(op.name)]; }
  // What a collective kernel's own args say (nothing recorded for other ops).
  const CommParams& comm_of(const GpuOp& op) const { return entry(comms, op.comm); }
  const CommParams& comm_of(const CpuSpan& span) const { return entry(comms, span.comm); }
  // A GEMM or attention span's inputs (none recorded for other spans).
  const OpInputs& inputs_of(const CpuSpan& span) const { return entry(inputs, span.inputs); }
  // args.phase of a stepsim trace's op, "" when absent.
  std::string_view phase_of(const GpuOp& op) const {
    return op.phase < 0 ? std::string_view{} : std::string_view(names[static_cast<std::size_t>(op.phase)]);
  }
  // A counter sample's series by name (none for Kineto's "[memory]" events).
  const MemCategories& categories_of(const MemSample& s) const { return entry(categories, s.categories); }
  // The device this rank computes on: the device of most GPU ops (0 if none).
  int main_device() const;

 private:
  // Entry i of a side table, or an empty one for -1 (nothing recorded).
  template <class T>
  static const T& entry(const std::vector<T>& table, int i) {
    static const T kNone{};
    return i < 0 ? kNone : table[static_cast<std::size_t>(i)];
  }
};

// The most records of one kind that one trace may hold (GPU ops, runtime calls, CPU spans,
// memory-bound op spans, memory samples, host operators, Python frames), and the most distinct
// names: 2^22 = 4,194,304, some 25 times the GPU ops of a 1 GB trace. One more is an input error
// naming the file and the event, so that memory is bounded whatever the file (docs/limits.md).
inline constexpr std::size_t kMaxTraceRecords = std::size_t{1} << 22;

// What the reader keeps beyond the records every analysis needs.
struct ReadOptions {
  // Every CPU operator and Python frame (host_ops, python_ops): the idle attribution's (analyze
  // --idle, fit --trace). Most of a trace's events are these; analyze keeps them only for --idle.
  bool host_ops = true;
  // The GEMM and attention op spans with their recorded inputs (CpuSpan::Kind::Gemm, Attention;
  // KinetoTrace::inputs) and the memory-bound op spans (memory_ops): what fit --trace and init
  // --from-trace price kernels from. analyze and compare never read them.
  bool fit_records = true;
  std::size_t max_records = kMaxTraceRecords;  // per kind, and distinct names (tests lower it)
};

// Reads a .json or .json.gz trace (gzip detected by magic bytes). Throws InputError naming the
// file on unreadable input or malformed JSON.
KinetoTrace read_kineto_trace(const std::filesystem::path& file, const ReadOptions& options = {});
// Whether `file` is a trace rather than stepsim's own JSON, from its first 4 KiB: gzip (a
// .json.gz trace), or a JSON object that opens with "traceEvents" or Kineto's header keys and
// has no stepsim schema. For commands that take either (compare).
bool looks_like_kineto_trace(const std::filesystem::path& file);
// Same, from a trace file's bytes in memory, gzip or not (tests and the fuzzers).
KinetoTrace read_kineto_trace_text(const std::string& bytes, const std::string& label, const ReadOptions& options = {});
// Same, from an uncompressed JSON stream read in windows of chunk_bytes (tests use tiny ones to
// cut every token at a window boundary); `label` names the input in errors. 64 KiB measured as
// fast as 1 MiB, and 1 MB less resident.
KinetoTrace read_kineto_trace_stream(std::istream& in, const std::string& label,
                                     std::size_t chunk_bytes = std::size_t{1} << 16, const ReadOptions& options = {});

// Helpers shared with the analysis; exposed for tests.
// "ncclKernel_AllReduce_RING_LL_Sum_float(...)", "ncclDevKernel_AllGather_RING_LL(...)".
bool is_nccl_kernel_name(const std::string& name);
// DeepEP's communication kernels, which move tokens between GPUs themselves (NVLink stores and
// IBGDA RDMA, no NCCL): deepseek-ai/DeepEP's csrc/kernels/{intranode,internode,internode_ll}.cu
// dispatch / combine / notify_dispatch / cached_notify / *_ll, in its namespace deep_ep:: or the
// dpsk::ep:: that deepseek-ai/profile-data's H800 trace records. Not get_dispatch_layout, a local
// kernel counting tokens per rank and expert (no traffic).
bool is_deepep_comm_kernel_name(const std::string& name);
// Either: a kernel the analysis counts as communication (collective time, not compute).
bool is_comm_kernel_name(const std::string& name);
TraceCollective collective_from_kernel_name(const std::string& name);
// "allreduce", "all_reduce", "nccl:_all_gather_base", "reduce_scatter_tensor_coalesced", ...
TraceCollective collective_from_op_name(const std::string& name);
// The simulator's kind, if the trace kind is one (SendRecv and Unknown are not).
std::optional<CollectiveKind> to_collective_kind(TraceCollective k);
// nccl-tests busbw factor (sim/hardware/collective_model's busbw_factor); 1 for SendRecv and
// Unknown, and for groups of fewer than 2 ranks whose size is unknown.
double collective_busbw_factor(TraceCollective k, int ranks);
// The dtype token of an NCCL kernel name ("..._Sum_bf16_RING_LL" -> "bf16"), "" if none.
std::string dtype_from_kernel_name(const std::string& name);
// Element size of a dtype name from any of the spellings above; 0 if unknown.
int dtype_bytes_from_name(const std::string& name);
// Elements of a tensor of recorded shape `dims` (a 0-dim tensor: 1); nullopt for a negative
// dimension or more than 2^57 elements, which no real tensor has (and a product must not overflow).
std::optional<std::int64_t> dims_numel(const std::vector<std::int64_t>& dims);
// The aten ops whose traffic follows from their Input Dims and Input types (memory_op_bytes):
// elementwise arithmetic and comparisons (and their in-place forms), copy_, fill_/zero_,
// dropout, softmax and its backward, sums and norms, LayerNorm forward.
bool is_memory_bound_op_name(std::string_view name);
// The launch of a kernel torch.compile generated: Inductor names the cpu_op after its Triton
// kernel, triton_poi_* (pointwise), triton_per_* (persistent reduction) or triton_red_* (looped
// reduction), and records the kernel's tensor arguments, inputs and outputs, as its Input Dims.
// memory_op_traffic counts each argument read or written once.
bool is_inductor_kernel_name(std::string_view name);
bool is_inductor_reduction_name(std::string_view name);  // triton_per_* or triton_red_*
// The bytes such an op reads plus writes, from Kineto's record_shapes args; nullopt when they
// do not say (no tensor input, an unknown dtype, dims and types of different lengths):
//  - reads: every tensor input (a 0-dim tensor is one element; "Scalar" inputs are none) but an
//    out= destination: a unary op's second tensor or a binary op's third, of the output's
//    elements, which is the write;
//  - writes: comparisons a bool of the broadcast shape; in-place ops (name ends in '_') their
//    first input, which copy_/fill_/zero_ do not read; native_dropout the output and a bool
//    mask; _softmax/_log_softmax and LayerNorm a tensor like the input; _softmax_backward_data
//    one like the gradient; sums and norms nothing (a reduced output); other ops the broadcast
//    shape in the dtype of the largest non-bool input.
std::optional<std::int64_t> memory_op_bytes(std::string_view name, const std::vector<std::vector<std::int64_t>>& dims,
                                            const std::vector<std::string_view>& types);
// The same op's bytes and the elements its kernel computes (the output's, for a reduction or
// norm its input's): what prices TensorIterator's non-vectorized path per element; and whether
// its tensor inputs are of different dtypes, so that kernel casts every element it loads
// (CUDALoops.cuh: needs_dynamic_casting; copy_ converts in its functor and does not).
struct MemoryTraffic {
  std::int64_t bytes = 0;
  std::int64_t elements = 0;
  bool casts = false;
  std::int64_t largest = 0;  // bytes of its largest tensor, read or written
};
std::optional<MemoryTraffic> memory_op_traffic(std::string_view name, const std::vector<std::vector<std::int64_t>>& dims,
                                               const std::vector<std::string_view>& types);
// One spelling per dtype: "bf16", "fp16", "fp32", "fp64", "int64", "int32", "int8", "uint8";
// unknown names are returned unchanged.
std::string canonical_dtype(const std::string& name);
// Exact microseconds-text -> ns ("1703670651148150", "4458676524648.797", "12.5e3").
Time parse_us_text(std::string_view text);

}  // namespace stepsim::trace
