#pragma once
// The Program IR: the per-step host program of one rank, exactly as the framework's Python
// would issue it (DESIGN.md section 1). A strategy builds a Program once; executors (the
// simulator in sim/exec, the live GPU executor in kernels/) run it and own all run state.

#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "sim/core/release.hpp"
#include "sim/core/strong_id.hpp"
#include "sim/core/text_pool.hpp"
#include "sim/core/units.hpp"

namespace stepsim {

// Indices into the Program's tables (sim/core/strong_id.hpp): a stream into Program::streams
// (StreamId{0} is the default stream), an event below Program::event_count.
using StreamId = Id<struct StreamTag>;
using EventId = Id<struct EventTag>;
using CommId = Id<struct CommTag>;  // into Program::comms
using BufferId = Id<struct BufferTag>;  // below Program::buffer_count

enum class Phase : std::uint8_t { Setup, Forward, Backward, Optimizer };
std::string to_string(Phase p);

enum class CollectiveKind : std::uint8_t { AllReduce, AllGather, ReduceScatter, Broadcast, Reduce, AllToAll };
std::string to_string(CollectiveKind k);
std::string_view name_of(CollectiveKind k);  // the same name, a view of a literal
std::string short_name(CollectiveKind k);  // AR, AG, RS, BC, RD, A2A
CollectiveKind parse_collective_kind(const std::string& name);  // "all_reduce", ...

// Memory categories of the breakdown (DESIGN.md section 5).
enum class MemCategory { Parameters, UnshardedParameters, Gradients, OptimizerState, Activations, CommBuffers, Other };
std::string to_string(MemCategory c);
inline constexpr int kMemCategoryCount = 7;

// One GEMM: C[m,n] = A[m,k] * B[k,n], `batch` times, in `dtype`.
// The operand layout of a GEMM as cuBLAS runs it (the `_nn`, `_nt`, `_tn` suffix of its kernel
// names): PyTorch's y = x W^T runs as "tn", its input gradient dy W as "nn" and its weight
// gradient dy^T x as "nt". Kernels and rates differ between them at the same m, n, k (and the
// forward's addmm adds the bias in its epilogue). Any: not known (microbenchmark tables).
enum class GemmLayout : std::uint8_t { Any, NN, NT, TN };
std::string_view to_string(GemmLayout l);        // "", "nn", "nt", "tn"
GemmLayout parse_gemm_layout(std::string_view s);  // to_string's inverse; Any for anything else
// From a cuBLAS/CUTLASS kernel name: the last "_nn", "_nt", "_tn" followed by "_", ">" or the
// end; Any when there is none ("_tt" is not one of PyTorch's linear layouts: Any).
GemmLayout gemm_layout_of_kernel(std::string_view kernel_name);

struct GemmShape {
  std::int64_t m = 0, n = 0, k = 0, batch = 1;
  Dtype dtype = Dtype::BF16;
  GemmLayout layout = GemmLayout::Any;
  Flops flops() const { return Flops{2.0 * static_cast<double>(m) * n * k * batch}; }
  auto operator<=>(const GemmShape&) const = default;
};

// The fused attention kernels, each priced at its own measured rate per direction
// (ComputeProfile::attention_rates, docs/workload-ops.md):
//  - Flash: FlashAttention-2's CUDA kernels as the flash_attn 2.x package builds them
//  - SdpaFlash: PyTorch sdpa's flash backend (its own vendored copy of FlashAttention-2)
//  - FlashTriton: the Triton FlashAttention (flash_attn_triton.py, llm-foundry's attn_impl triton)
//  - Flash3: FlashAttention-3 (Hopper only: wgmma/TMA)
//  - SdpaEfficient: sdpa's memory-efficient backend (the xformers cutlass kernel)
//  - SdpaCudnn: sdpa's cuDNN backend (cuDNN's fused flash attention, the kernels cudnn-frontend
//    generates per graph: cudnn_generated_fort_native_sdpa_* in a trace)
enum class AttentionKernel : std::uint8_t { Flash, SdpaFlash, FlashTriton, Flash3, SdpaEfficient, SdpaCudnn };
inline constexpr int kAttentionKernelCount = 6;
std::string to_string(AttentionKernel k);

// The work of a fused attention kernel: its causal FLOPs (QK^T and PV halved), which kernel,
// which direction, the sequence length it runs over (its rate grows with it) and the model's head
// dimension (0: not known, the FLOPs as given).
struct AttentionWork {
  Flops flops;
  AttentionKernel kernel = AttentionKernel::Flash;
  bool backward = false;
  std::int64_t seq = 0;
  std::int64_t head_dim = 0;
  // The flash_attn package's release (Flash only: its kernel widths changed, attention_kernel_head_dim).
  Release flash_attn = kDefaultFlashAttnRelease;
  bool operator==(const AttentionWork&) const = default;
};

// The head dimension a kernel computes with for a model's `head_dim`: the kernels are compiled
// for a few widths and a head between them runs the next wider one, its extra columns zero.
//  - SdpaFlash (PyTorch's vendored FlashAttention-2): 32, 64, 96, 128, 160, 192, 224, 256
//    (pytorch/pytorch@035290b7 aten/src/ATen/native/transformers/cuda/flash_attn/static_switch.h
//    HEADDIM_SWITCH: `if (HEADDIM <= 32) kHeadDim = 32; else if (HEADDIM <= 64) ...`);
//  - Flash (the flash_attn package, csrc/flash_attn/src/static_switch.h HEADDIM_SWITCH, by the
//    release `flash_attn`): the same eight up to v2.6.1; 224 dropped from v2.6.2
//    (Dao-AILab/flash-attention 751c762c, 2024-07-23, "Don't specialize for hdim 224": v2.6.2's
//    switch, l.90-111, goes 192 -> 256), 160 dropped from v2.8.0 (ce212720, 2025-04-29, "Don't
//    specialize for hdim 160 anymore": v2.8.0's, l.90-108, goes 128 -> 192 -> 256);
//    flash_api.cpp pads q/k/v to a multiple of 8 first;
//  - FlashTriton: the next power of two, at least 16 (flash_attn_triton.py `BLOCK_HEADDIM =
//    max(triton.next_power_of_2(d), 16)`; llm-foundry's copy at c6cfb4284, l.622), up to its 128;
//  - Flash3, SdpaEfficient, SdpaCudnn: the head dimension itself (FlashAttention-3 builds each
//    supported width exactly, cuDNN generates its kernel for the graph's; the memory-efficient
//    kernel is not modelled by width).
std::int64_t attention_kernel_head_dim(AttentionKernel k, std::int64_t head_dim, Release flash_attn = kDefaultFlashAttnRelease);

// The FLOPs the kernel executes: the model's, times kernel head dim / head dim.
Flops attention_executed_flops(const AttentionWork& a);

// The FLOPs a fused attention kernel does over `batch` sequences of `seq` tokens with `hidden`
// = heads x head_dim: 4 b s^2 h forward (QK^T and PV) and 10 b s^2 h backward (the forward's
// QK^T recomputed, and the four gradient matmuls), halved when causal (FlashAttention-2 paper,
// section 4: FLOPs of a causal kernel).
Flops fused_attention_flops(std::int64_t batch, std::int64_t seq, std::int64_t hidden, bool backward, bool causal);

// What a kernel does, for the cost model and for the live executor: a list of GEMMs, bytes of
// memory-bound traffic (read + write), the FLOPs of a fused attention kernel (priced at its
// measured rate), and a fixed time (toy workloads, measured kernels). The time is the sum.
// The GEMMs of one kernel, contiguous: one held inline (a GEMM op has one; a launch per op per
// micro-batch once allocated a vector for it, a quarter of a sweep point's allocations), all of
// them on the heap once there are two (kernels merged from several ops). A move copies the inline
// one and takes the heap vector's three pointers, and cannot throw: a launch's kernel is moved
// several times on its way into the program, and boost's small_vector, which this replaces, moved
// element by element through generic code whose moves are not noexcept (so a growing
// std::vector<Instruction> copied every instruction): a tenth of a sweep point (issue 49).
class GemmList {
 public:
  GemmList() = default;
  GemmList(std::initializer_list<GemmShape> gemms) {
    for (const GemmShape& g : gemms) push_back(g);
  }
  GemmList(const GemmList&) = default;
  GemmList& operator=(const GemmList&) = default;
  GemmList(GemmList&& o) noexcept : one_(o.one_), many_(std::move(o.many_)), size_(std::exchange(o.size_, 0)) {}
  GemmList& operator=(GemmList&& o) noexcept {
    one_ = o.one_;
    many_ = std::move(o.many_);
    size_ = std::exchange(o.size_, 0);
    return *this;
  }

  void push_back(const GemmShape& g) {
    if (size_ == 0) {
      one_ = g;
    } else {
      if (size_ == 1) many_.assign(1, one_);
      many_.push_back(g);
    }
    ++size_;
  }
  void append(const GemmList& o) {
    if (&o == this) {  // push_back may move the GEMMs it reads
      const GemmList copy = o;
      append(copy);
      return;
    }
    for (const GemmShape& g : o) push_back(g);
  }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const GemmShape* begin() const { return size_ <= 1 ? &one_ : many_.data(); }
  const GemmShape* end() const { return begin() + size_; }
  GemmShape* begin() { return size_ <= 1 ? &one_ : many_.data(); }
  GemmShape* end() { return begin() + size_; }
  const GemmShape& front() const { return *begin(); }
  const GemmShape& operator[](std::size_t i) const { return begin()[i]; }
  GemmShape& operator[](std::size_t i) { return begin()[i]; }
  bool operator==(const GemmList& o) const { return std::equal(begin(), end(), o.begin(), o.end()); }

 private:
  GemmShape one_{};
  std::vector<GemmShape> many_;  // every GEMM, once there are two or more
  std::uint32_t size_ = 0;
};
static_assert(std::is_trivially_copyable_v<GemmShape>);

struct KernelWork {
  GemmList gemms;
  Bytes memory_bytes;
  AttentionWork attention;
  Time fixed;
  // Elements a non-vectorized elementwise kernel (ElementwiseStrided) computes, summed over its
  // kernels: that path costs per element as much as per byte (ComputeProfile::strided_element_ns).
  std::int64_t elements = 0;
  // Of those, the elements computed through a dtype cast (mixed-dtype operands: TensorIterator's
  // dynamic-casting loads, ComputeProfile::strided_cast_element_ns).
  std::int64_t cast_elements = 0;
  // The largest tensor one of its kernels reads or writes, which decides whether the output of
  // the kernel before can still be in the L2 (ComputeProfile::dram_stream). 0: memory_bytes over
  // twice its kernels (a kernel reading and writing tensors of one size).
  Bytes tensor;
  // Generated by torch.compile (an Inductor Triton kernel): a Norm or Reduction kernel is priced
  // at ComputeProfile::inductor_reduction where the profile has it.
  bool generated = false;

  // Sums the parts; merged attention work keeps the first kernel, direction and sequence
  // (a layer's kernels, merged into one, share them).
  KernelWork& operator+=(const KernelWork& o);
  bool operator==(const KernelWork&) const = default;
  bool empty() const {
    return gemms.empty() && memory_bytes.count == 0 && attention.flops.count == 0 && fixed.ns == 0;
  }
};

// What a kernel is, for pricing and for the per-class breakdown. Memory-bound classes are
// priced at their own achieved bandwidth (ComputeProfile::class_bandwidth) because PyTorch runs
// them through different code paths with very different efficiency:
//  - Elementwise: TensorIterator's vectorized path (contiguous, same dtype: vectorized_elementwise_kernel)
//  - ElementwiseStrided: its non-vectorized path (broadcast, strided or dtype-casting operands:
//    elementwise_kernel / unrolled_elementwise_kernel), e.g. the attention-mask add, torch.max
//    against a scalar tensor, and `.contiguous()` of a transposed view
//    (aten/src/ATen/native/cuda/CUDALoops.cuh, gpu_kernel_impl: `if (contiguous) launch_vectorized_kernel`)
//  - Reduction: softmax / log_softmax and their backward, sum/mean reductions (bias grads, loss)
//  - Norm: LayerNorm / RMSNorm forward and backward
//  - Copy: contiguous copies, casts, cat/flatten of buffers (bucket and partition bookkeeping)
//  - Embedding: index_select forward and the sort + scatter-add backward
//  - Optimizer: the optimizer step (multi_tensor_apply / fused kernels)
// Gemm and Attention kernels are priced by FLOPs (GEMM table / attention efficiency); Compute is
// a kernel with a fixed or aggregate cost (toy workloads, measured kernels).
enum class KernelClass : std::uint8_t { Compute, Gemm, Attention, Elementwise, ElementwiseStrided, Reduction, Norm, Copy, Embedding, Optimizer };
inline constexpr int kKernelClassCount = 10;
std::string to_string(KernelClass c);
// "gemm", "elementwise_strided", ...: the names of to_string; throws std::out_of_range otherwise.
KernelClass parse_kernel_class(const std::string& name);
// True for the classes priced by bytes at an achieved bandwidth (all but Compute, Gemm, Attention).
bool is_memory_bound(KernelClass c);

// How the host issues a kernel; HostProfile prices each. Launch: a bare launch (a compiled graph,
// a framework's own C++/CUDA call); Eager: an aten op dispatched from Python in eager forward
// (module call, dispatcher, autograd graph recording); Autograd: an op run by the autograd
// engine's C++ thread in backward; Continue: a further kernel of the aten call that launched
// the previous one, of another class (an out-of-place masked_fill's clone, then its fill): the
// host pays only its launch.
enum class HostDispatch : std::uint8_t { Launch, Eager, Autograd, Continue };

// A device-to-device cudaMemcpyAsync: a Copy that stands for no CUDA kernel (memcpy_dtod). Priced
// at the profile's memcpy rate, and neither compute nor communication in the metrics, as a
// trace's Memcpy ops are.
inline bool is_memcpy(KernelClass cls, int kernels) { return kernels == 0 && cls == KernelClass::Copy; }

// A kernel as the strategies' helpers describe it: its names as strings and its work by value.
// ProgramBuilder::launch stores it in the program as a Kernel.
struct KernelSpec {
  std::string name;  // "fwd block.3", "bwd block.3", "copy-out block.3", "adamw"
  KernelClass cls = KernelClass::Compute;
  KernelWork work;
  std::string unit;  // the FSDP unit / bucket / module it belongs to, "" if none
  // CUDA kernels this launch stands for (an aten op such as layer_norm backward or the
  // embedding backward launches several); the GPU time is the sum, the count is reported.
  int kernels = 1;
  HostDispatch dispatch = HostDispatch::Launch;
  // The kernel's (class, kernels, work) as its workload numbered it (Op::work_id, number_works):
  // two kernels of one program with the same id cost the same, so the engine prices each id
  // once. 0: not numbered (priced on its own). Whoever changes a numbered kernel's class,
  // kernels or work sets it to 0.
  std::uint16_t work_id = 0;
};

// The work of a kernel that does none (a default Kernel's).
extern const KernelWork kNoWork;

// A kernel launch as a Program holds it: KernelSpec's fields, with the names as Text in the
// program's pool (Program::text) and the work as a pointer into the program's works
// (Program::works), where each numbered work is stored once. A step launches 10^3-10^5 kernels:
// a heap string per name was half of a sweep point's allocations, and the work by value made an
// instruction 232 bytes where it is 72 now, most of the memory the engine and the builder move
// (issue 49).
struct Kernel {
  Text name;
  KernelClass cls = KernelClass::Compute;
  HostDispatch dispatch = HostDispatch::Launch;
  std::uint16_t work_id = 0;  // KernelSpec::work_id
  int kernels = 1;
  const KernelWork* work = &kNoWork;  // never null; owned by the program's WorkPool (or the caller's)
  Text unit;
};

// The Kernel a program would hold for `k`, its work `k`'s own (valid while `k` is) and no names:
// what the cost model reads (tests and tools price a KernelSpec so).
inline Kernel unnamed_kernel(const KernelSpec& k) {
  return Kernel{.cls = k.cls, .dispatch = k.dispatch, .work_id = k.work_id, .kernels = k.kernels, .work = &k.work};
}
inline Kernel unnamed_kernel(KernelSpec&&) = delete;  // its work would be gone

// A program's kernel works, at addresses that stay put (Kernel::work points here). Shared by the
// copies of a program, as its TextPool is; a copy that changes works puts them in a pool of its
// own. Not thread-safe (filled by the one thread that builds the program).
class WorkPool {
 public:
  WorkPool() = default;
  WorkPool(const WorkPool&) = delete;
  WorkPool& operator=(const WorkPool&) = delete;
  const KernelWork* add(const KernelWork& w);
  // Work number `id` (Op::work_id, not 0) of the workload whose layers share `workload`'s names
  // (Layer::text): stored at its first launch, shared by the later ones (found inline: a step
  // launches thousands of kernels of a few dozen works).
  const KernelWork* add_numbered(const void* workload, std::uint16_t id, const KernelWork& w) {
    if (id != 0 && workload != nullptr && workload == numbered_from_ && id < numbered_.size() && numbered_[id] != nullptr)
      return numbered_[id];
    return store_numbered(workload, id, w);
  }
  std::size_t size() const { return size_; }

 private:
  const KernelWork* store_numbered(const void* workload, std::uint16_t id, const KernelWork& w);
  static constexpr std::size_t kChunk = 64;
  std::vector<std::unique_ptr<KernelWork[]>> chunks_;
  std::size_t size_ = 0;
  const void* numbered_from_ = nullptr;  // the one workload add_numbered shares works of
  std::vector<const KernelWork*> numbered_;  // by work id
};

struct Launch {
  StreamId stream{0};
  Kernel kernel;
};

struct Collective {
  CommId comm{0};
  StreamId stream{0};
  CollectiveKind kind = CollectiveKind::AllReduce;
  // nccl-tests convention (C6.1): all-reduce/broadcast/reduce: the buffer; all-gather: the
  // whole gathered output; reduce-scatter: the whole unreduced input; all-to-all: total bytes.
  Bytes bytes;
  Dtype dtype = Dtype::BF16;
  Text name;   // "AG block.17 fwd", "AR bucket 3"
  Text unit;
};

struct Record { EventId event{0}; StreamId stream{0}; };
struct Wait { StreamId stream{0}; EventId event{0}; };

// The CPU blocks until the GPU reaches a point: an event's latest record, or everything
// queued so far on a stream. `reason` names the framework call (for reports).
struct HostSync {
  std::variant<EventId, StreamId> target{EventId{0}};  // cudaEventSynchronize / cudaStreamSynchronize
  Text reason;  // the framework call that blocks: in the program's pool, or a literal
};

struct Alloc {
  BufferId buffer{0};
  Bytes bytes;
  MemCategory category = MemCategory::Other;
  StreamId stream{0};
  Text name;
  // torch.optim state (`_init_group`: zeros_like at the first step()): live in the steady step
  // from setup on, but the caching allocator first meets it inside the first step, at the
  // optimizer phase, in cached blocks that the step's activations left (docs/memory.md).
  bool lazy = false;
};

// The streams a tensor was record_stream'ed on, inline: the frameworks record one or two
// (a heap vector each was ~300 of an FSDP1 sweep point's 2,200 allocations, issue 49).
class RecordStreams {
 public:
  static constexpr std::size_t kCapacity = 4;
  RecordStreams() = default;
  RecordStreams(std::initializer_list<StreamId> streams) {
    for (StreamId s : streams) push_back(s);
  }
  void push_back(StreamId s) {
    if (size_ == kCapacity) throw std::logic_error("a free records more than four streams");
    streams_[size_++] = s;
  }
  const StreamId* begin() const { return streams_.data(); }
  const StreamId* end() const { return streams_.data() + size_; }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  bool operator==(const RecordStreams& o) const { return std::equal(begin(), end(), o.begin(), o.end()); }

 private:
  std::array<StreamId, kCapacity> streams_{StreamId{0}, StreamId{0}, StreamId{0}, StreamId{0}};
  std::uint8_t size_ = 0;
};

// A plain free takes effect at issue (stream-ordered reuse). With record_streams the memory
// returns when the GPU has finished the work queued on those streams before the free.
struct Free {
  BufferId buffer{0};
  RecordStreams record_streams;
};

struct HostWork { Time duration; std::string name; };

// A named point. A Mark with a phase starts that phase for every op issued after it.
struct Mark { std::string name; std::optional<Phase> phase; };

using Instruction = std::variant<Launch, Collective, Record, Wait, HostSync, Alloc, Free, HostWork, Mark>;
// A program of a deep model holds ~10^5 instructions: its vector grows by moving them, not copying.
static_assert(std::is_nothrow_move_constructible_v<Instruction>);

struct StreamDecl { std::string name; int priority = 0; };

// A communicator (process group) and where its ranks sit: the cost model picks its scope
// (intra-node when nodes == 1, inter-node otherwise) from this shape.
struct CommDecl {
  std::string name;
  int ranks = 1;
  int nodes = 1;
  // The collectives the program issues on it, counted by ProgramBuilder::collective (the
  // ProgramChecker refuses a collective on a communicator that counts none): the engine counts
  // the communicators NCCL creates from these, where a pass over the program cost a 4,096-layer
  // step 5 % of its time.
  std::size_t collectives = 0;
};

struct Program {
  std::vector<StreamDecl> streams;   // index = StreamId; stream 0 is the default stream
  std::vector<CommDecl> comms;       // index = CommId
  std::size_t event_count = 0;
  std::size_t buffer_count = 0;
  std::vector<Instruction> instructions;
  std::vector<Text> buffer_names;  // index = BufferId
  // Where the names of kernels, collectives and buffers are stored; copies of a program share it.
  std::shared_ptr<TextPool> text = std::make_shared<TextPool>();
  // Where its kernels' works are stored (Kernel::work); copies of a program share it.
  std::shared_ptr<WorkPool> works = std::make_shared<WorkPool>();
};

}  // namespace stepsim
