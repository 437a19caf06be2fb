#pragma once
// A hardware profile: every cost constant the simulator uses, each traceable to a source
// (datasheet, a log in data/, or a calibration run recorded under "provenance").
// The JSON format is documented in docs/configuration.md ("Hardware profiles").

#include <algorithm>
#include <array>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/core/non_pytorch_part.hpp"
#include "sim/core/units.hpp"
#include "sim/program/program.hpp"

namespace stepsim {

// t = alpha + S / beta for S <= max_bytes (raw alpha-beta; S per the nccl-tests convention).
struct AlphaBetaRange {
  Bytes max_bytes{std::numeric_limits<std::int64_t>::max()};
  Time alpha;
  Bandwidth beta;
  // What `stepsim fit` recorded of the fit that made the range (min_bytes, points, r2,
  // max_rel_error), written back as read so that a range a refit keeps keeps them; not used by
  // the model. Absent from hand-written ranges.
  struct FitQuality {
    std::int64_t min_bytes = 0;
    std::int64_t points = 0;
    double r2 = 0;
    double max_rel_error = 0;
    bool operator==(const FitQuality&) const = default;
  };
  std::optional<FitQuality> fit;
  bool operator==(const AlphaBetaRange&) const = default;
};

// A measured point: S bytes (nccl-tests convention) took `time` on a group of `ranks`.
struct MeasuredCollective {
  Bytes bytes;
  Time time;
  bool operator==(const MeasuredCollective&) const = default;
};

// The collective model of one scope (intra-node or inter-node), one struct per "model" of the
// profile (docs/configuration.md, Hardware profiles), each holding only the numbers its cost
// rule reads (sim/hardware/collective_model.cpp).

// "alpha_beta": raw t = alpha + S / beta ranges per collective kind; kinds not listed use
// `default_ranges`.
struct AlphaBetaModel {
  std::map<CollectiveKind, std::vector<AlphaBetaRange>> ranges;
  std::vector<AlphaBetaRange> default_ranges;
  // Group size each kind's ranges were measured on ("ranks": {"all_reduce": 16}). A
  // communicator of another size rescales the bandwidth term by the busbw factor ratio
  // factor(n) / factor(ranks), which is what carries across group sizes (C6.1). Kinds not
  // listed are used as measured, whatever the group size (raw alpha-beta, the textbook form).
  std::map<CollectiveKind, int> ranks;
  // Ranges measured on further group sizes of the same scope ("groups": {"all_reduce": {"2":
  // [...], "4": [...]}}), for kinds listed in `ranks`. A communicator uses the ranges of the
  // measured group size nearest its own (exact when measured), rescaled as above.
  std::map<CollectiveKind, std::map<int, std::vector<AlphaBetaRange>>> groups;
  bool operator==(const AlphaBetaModel&) const = default;
};

// "ring" (C6.2): per-step latency, bus bandwidth, fixed base latency.
struct RingModel {
  Bandwidth busbw;
  Time step_latency;
  Time base_latency;
  bool operator==(const RingModel&) const = default;
};

// The double binary tree's own constants (C6.3); 0 takes the ring's.
struct TreeConstants {
  Bandwidth busbw;
  Time step_latency;  // per tree level
  bool operator==(const TreeConstants&) const = default;
};

// "tree": the tree for all-reduce, the ring for every other collective (so it reads both).
struct TreeModel {
  RingModel ring;
  TreeConstants tree;
  bool operator==(const TreeModel&) const = default;
};

// "nccl": the faster of ring and tree (C6.4). The same numbers as "tree", a different rule.
struct NcclModel {
  RingModel ring;
  TreeConstants tree;
  bool operator==(const NcclModel&) const = default;
};

// "table": measured points per kind and group size (sorted by bytes).
struct TableModel {
  std::map<CollectiveKind, std::map<int, std::vector<MeasuredCollective>>> points;
  bool operator==(const TableModel&) const = default;
};

// A default-constructed ScopeModel is a ring with no bandwidth (never priced: a profile always
// names its model).
using ScopeModel = std::variant<RingModel, AlphaBetaModel, TreeModel, NcclModel, TableModel>;
// The profile's name of the model: "ring", "alpha_beta", "tree", "nccl", "table".
std::string model_name(const ScopeModel& m);

// NCCL's constant tables are per GPU generation (src/graph/tuning.cc:177-211: llMaxBws,
// perCh*Bws indexed by compute capability); the profile names which row applies.
enum class NcclArch { Volta, Ampere, Hopper, Blackwell };
std::string to_string(NcclArch a);

// The group shapes a topology fit saw (closed ranges). A communicator outside them is an
// extrapolation: the prediction is still made, and flagged (explain, result JSON).
struct FittedRange {
  int min_ranks = 0, max_ranks = 0;
  int min_nodes = 0, max_nodes = 0;
  int min_gpus_per_node = 0, max_gpus_per_node = 0;
  bool empty() const { return max_ranks == 0; }
  bool covers(int ranks, int nodes) const;
  bool operator==(const FittedRange&) const = default;
};

// A topology-aware NCCL model for every communicator of the cluster ("collectives.topology"),
// the structure of NCCL's tuner (src/graph/tuning.cc, docs/collectives.md): ring, tree and,
// where declared, NVLS / NVLS-tree algorithms; LL, LL128 and Simple protocols; per-hop latency
// over NVLink and over the network; bandwidth per level, the slowest level bounding.
struct NcclTopology {
  NcclArch arch = NcclArch::Hopper;
  int gpus_per_node = 8;     // GPUs of one NVLink domain (a node)
  // NVLink / NVSwitch level.
  Bandwidth nvlink_busbw;    // ring bus bandwidth per GPU (nccl-tests busbw of a one-node ring)
  Bandwidth nvls_bw;         // NVLink SHARP per-GPU link bandwidth; 0: no NVLS on this hardware
  Bandwidth nvlink_all_to_all_busbw;  // 0: nvlink_busbw
  double nvlink_latency_scale = 1;    // x NCCL's NVLink hwLatencies (tuning.cc:159-162)
  // The ring's local pass: per rank, S/n bytes (its own chunk: the first send from the input,
  // the last write of the output) at this rate, not hidden behind the wire steps; 0: none.
  // docs/collectives.md, "The local pass".
  Bandwidth nvlink_local_bw;
  // Network level: NICs per node, each `nic_bw` per direction (achieved).
  int nics_per_node = 1;
  Bandwidth nic_bw;
  Bandwidth nic_all_to_all_bw;        // 0: nic_bw
  double net_latency_scale = 1;       // x NCCL's NET hwLatencies (tuning.cc:171-174)
  // The fabric above the nodes: a communicator across more than `leaf_nodes` nodes (0: across
  // any two) crosses the spine, where each NIC gets nic_bw / oversubscription (1: non-blocking).
  int leaf_nodes = 0;
  double oversubscription = 1;
  int channels = 16;                  // NCCL channels, for the ring plateau rule (tuning.cc:647-650)
  bool tree = true;                   // tree all-reduce allowed (NCCL_ALGO default)
  bool ll128 = true;                  // LL128 enabled (tuning.cc:518-536)
  FittedRange fitted;                 // empty: not fitted (datasheet numbers)
  bool operator==(const NcclTopology&) const = default;
};

struct GemmMeasurement {
  GemmShape shape;
  FlopRate rate;   // measured FLOP/s
  bool operator==(const GemmMeasurement&) const = default;
};

// A fused attention kernel's rate as a fraction of peak: it approaches `forward` / `backward`
// for long sequences and reaches half of that at `half_rate_seq` (a causal kernel's first query
// blocks see few keys, and each block has fixed work): efficiency(s) = e * s / (s + half_rate_seq).
struct AttentionRate {
  double forward = 0;
  double backward = 0;
  std::int64_t half_rate_seq = 0;
  double at(bool backward_pass, std::int64_t seq) const;
  bool operator==(const AttentionRate&) const = default;
};

// Power-limited sustained clocks (compute.clock; docs/workload-ops.md, "Sustained clocks"). A
// Hopper SXM part boosts to 1,980 MHz, the clock a microbenchmark of a few dozen calls runs at,
// but a kernel keeping every SM's tensor cores busy draws more than the board's power limit at
// that clock and the power controller lowers it (deepseek-ai/DeepGEMM#120: 1,980 -> 1,575 MHz on
// an H800 with communication overlapping its GEMMs). Dynamic power ~ activity x f x V^2 with V ~ f
// over the DVFS range, so at the limit activity u x f^3 is constant: a compute-bound kernel
// reaching a fraction u of the dense peak (at boost) sustains
//   f(u) = min(boost, full_load x u^(-1/3)),
// full_load being the clock at which a kernel issuing tensor-core work every cycle (u = 1) meets
// the limit: one number per power limit. Memory-bound kernels are priced by bandwidth, which the
// SM clock does not set.
struct ClockProfile {
  double boost_mhz = 0;       // the clock gemm_table and compute.attention were measured at
  double power_limit_w = 0;   // the board power limit full_load_mhz belongs to (reported)
  double full_load_mhz = 0;   // 0: no power-limited clock modelled
  bool active() const { return boost_mhz > 0 && full_load_mhz > 0; }
  // The sustained / boost clock of a compute-bound kernel at fraction u of peak: in (0, 1].
  double factor(double u) const;
  bool operator==(const ClockProfile&) const = default;
};

enum class GemmRates { Microbenchmark, InTraining };
std::string to_string(GemmRates r);

struct ComputeProfile {
  std::map<Dtype, FlopRate> peak;     // dense peak per dtype
  Bandwidth hbm;                      // datasheet HBM bandwidth
  double memory_efficiency = 0.8;     // fraction of `hbm` reached by memory-bound kernels
  double gemm_efficiency = 0.7;       // roofline fallback: fraction of peak without a table entry
  double attention_efficiency = 0.5;  // fraction of peak of a fused attention kernel without a rate
  // Fraction of peak of the memory-efficient sdpa kernel without a rate; 0 = attention_efficiency.
  double efficient_attention_efficiency = 0;
  // Measured rates of the fused attention kernels (compute.attention.<kernel>), indexed by
  // AttentionKernel; a kernel without one runs at attention_efficiency.
  std::array<std::optional<AttentionRate>, kAttentionKernelCount> attention_rates;
  // The bf16 dense peak of the part gemm_table was measured on; table rates scale by
  // peak(bf16) / gemm_table_peak (a power- or clock-limited variant of the measured chip).
  // 0: the table was measured on this part.
  FlopRate gemm_table_peak;
  // GEMMs inside a training step reach less than in an isolated microbenchmark (clocks under
  // power limits, cold caches, SMs taken by NCCL): achieved / microbenchmark rate, applied to
  // table lookups. 1 = the table is used as measured; gemm_rate_source says which was used.
  double gemm_in_training_factor = 1.0;
  // What gemm_table's rates are: an isolated microbenchmark (calibrate gemm, XLA's table) or
  // rates achieved inside a training step (fit --trace).
  GemmRates gemm_table_rates = GemmRates::Microbenchmark;
  // Power-limited sustained clock of GEMMs (from a microbenchmark table or the roofline) and
  // fused attention; table rates measured inside a step (InTraining) carry it already.
  ClockProfile clock;
  bool model_memory_kernels = true;   // false: memory-bound kernels take no time (textbook cases)
  Time min_kernel_time;               // floor for any non-empty kernel (per CUDA kernel)
  // Device-side gap between two back-to-back kernels of a stream even when the second is
  // already queued (launch latency on the GPU): added once per CUDA kernel of a launch.
  Time kernel_gap;
  std::vector<GemmMeasurement> gemm_table;
  // Achieved bandwidth (read + written bytes / kernel time) per memory-bound kernel class
  // ("memory_bandwidth_GBps": {"elementwise": ..., "reduction": ...}); a class not listed runs
  // at hbm * memory_efficiency.
  std::map<KernelClass, Bandwidth> class_bandwidth;
  // Achieved bandwidth of the reductions torch.compile generates (Inductor's Triton
  // triton_per_* / triton_red_* kernels: fused norms, their backward, softmax and loss
  // reductions), which price a Norm or Reduction kernel marked KernelWork::generated
  // ("memory_bandwidth_GBps": {"inductor_reduction": ...}). 0: the class's rate, as aten's kernels.
  Bandwidth inductor_reduction;
  // Time per element of TensorIterator's non-vectorized path (ElementwiseStrided): each thread
  // computes every operand's offset per element and, with mixed dtypes, casts it, so a kernel
  // with a narrow (bool) output takes as long per element as one with 2-byte operands. Such a
  // kernel takes the longer of its bytes at the class bandwidth and its elements at this time.
  // 0: bytes alone (compute.elementwise_strided_ns_per_element).
  double strided_element_ns = 0;
  // The same for the elements such a kernel computes through a dtype cast (operands of mixed
  // dtypes, e.g. a bf16 tensor against a float 0-dim tensor: CUDALoops.cuh's dynamic-casting
  // loads, a switch on the operand's dtype per element). 0: strided_element_ns
  // (compute.elementwise_strided_cast_ns_per_element).
  double strided_cast_element_ns = 0;
  // The L2 and the rate of a kernel streaming tensors larger than it (BabelStream's Add over
  // arrays many times the L2): class bandwidths measured on tensors the L2 holds (the output of
  // the kernel before still in it) overstate what an op over larger ones reaches, so a
  // memory-bound kernel whose largest tensor exceeds l2_bytes runs at most at dram_stream
  // (compute.l2_cache_MiB, compute.dram_stream_GBps; either 0: no such cap).
  double l2_bytes = 0;
  Bandwidth dram_stream;
  // A device-to-device cudaMemcpyAsync (a same-dtype contiguous copy_: memcpy_dtod, 0 CUDA
  // kernels), read + write bytes: a copy engine / driver path, not the Copy class's kernels
  // (torch.cat, split copies), which move data at a lower rate. 0: the Copy class rate.
  Bandwidth memcpy;
  bool operator==(const ComputeProfile&) const = default;
};

// Fluid contention: while a collective and a compute kernel overlap, the kernel runs at
// 1/(1+compute_slowdown) of its solo rate and the collective at 1/(1+comm_slowdown).
struct ContentionProfile {
  double compute_slowdown = 0;
  double comm_slowdown = 0;
  // SMs of the GPU and SMs a running collective's NCCL kernel holds (its CTAs: one per channel,
  // one per SM). Both > 0 turn on the resource model: a compute-bound kernel (GEMM, attention)
  // beside collectives runs on the SMs they leave, a memory-bound one on the HBM bandwidth their
  // data paths leave; compute_slowdown then goes unused.
  int gpu_sms = 0;
  int collective_sms = 0;

  bool models_resources() const { return gpu_sms > 0 && collective_sms > 0; }
  // Slowdown of a compute-bound kernel beside `collectives` (>= 1) running collectives: the SMs
  // they hold, at most half the GPU's.
  double compute_bound_slowdown(int collectives) const {
    if (!models_resources()) return compute_slowdown;
    const int held = std::min(collectives * collective_sms, gpu_sms / 2);
    return static_cast<double>(gpu_sms) / (gpu_sms - held) - 1.0;
  }
  // Slowdown of a memory-bound kernel beside collectives whose data paths ask for `hbm_share`
  // of the HBM bandwidth: HBM is shared in proportion to demand (the kernel's whole bandwidth,
  // the collectives' share), so the kernel gets 1/(1+share) of it; and the collectives, beside
  // a memory-bound kernel, get share/(1+share) for their share: the same slowdown.
  double memory_bound_slowdown(double hbm_share) const {
    if (!models_resources()) return compute_slowdown;
    return std::max(0.0, hbm_share);
  }
  bool operator==(const ContentionProfile&) const = default;
};

// Ranks are not identical (issue 46; docs/scale.md): the same kernel takes a little longer on one
// GPU than another (clocks, thermals, memory placement), and a collective starts when its slowest
// rank arrives. Relative standard deviations between ranks, fitted by `stepsim fit --trace` from
// the traces of several ranks of one job. All 0: every rank is the one simulated.
struct RankVariation {
  // Of one kernel's time, independent from kernel to kernel, per class (KernelClass order).
  std::array<double, kKernelClassCount> kernel_cv{};
  // Of a rank's speed, held through a step (a GPU that is slower stays slower): its share of the
  // time since the ranks last met grows with that time.
  double persistent_cv = 0;
  // Of one host instruction's CPU time, independent between instructions.
  double host_cv = 0;
  std::string source;  // where the numbers came from

  bool enabled() const {
    return persistent_cv > 0 || host_cv > 0 || std::any_of(kernel_cv.begin(), kernel_cv.end(), [](double v) { return v > 0; });
  }
  bool operator==(const RankVariation&) const = default;
};

// HBM bytes a ring collective moves per byte of bus traffic: at each step one chunk arrives in
// the receive buffer (written) and is read back with the local operand (reduce) or copied to the
// output (gather): about one write and two reads.
inline constexpr double kCollectiveHbmBytesPerBusByte = 3.0;

// CPU cost per host instruction (the framework's Python and CUDA API overhead).
struct HostProfile {
  Time launch_overhead;      // per Launch of a kernel issued without eager dispatch (HostDispatch::Launch)
  // Eager PyTorch's CPU cost per aten op (from the profiler's CPU op spacing): an op dispatched
  // from Python in forward (module call, dispatcher, autograd recording, launch), and one run
  // by the autograd engine in backward; each further kernel of a multi-kernel op costs
  // kernel_launch_overhead. 0 = launch_overhead.
  Time eager_op_overhead;
  Time autograd_op_overhead;
  Time kernel_launch_overhead;
  // The autograd engine's start per node of the graph (Engine::execute's compute_dependencies
  // walks every node before the first runs): paid once per backward, the GPU idle behind it
  // when nothing is queued. 0: not modelled.
  Time autograd_engine_per_node;
  Time collective_overhead;  // per Collective (c10d + NCCL enqueue)
  Time event_overhead;       // per Record / Wait
  Time alloc_overhead;       // per Alloc / Free
  // The training loop's own host time around the framework's step (data loading, input copies,
  // logging): from the step's start to its first GPU work, and from its last GPU work (after the
  // loop's synchronize) to its end. Measured by `fit --trace` on the user's job; 0 by default.
  Time step_start;
  Time step_end;
  // One write of DeepSpeed's monitor on rank 0 (add_scalar and flush; ZeroConfig::monitor):
  // measured by `fit --trace` from a trace with Python stacks; 0 by default.
  Time monitor_write;
  bool operator==(const HostProfile&) const = default;
};

// Device memory a training process holds outside PyTorch's caching allocator, so neither
// torch.cuda.memory_allocated() nor memory_reserved() shows it, but it counts against the
// capacity (issues 14 and 48; docs/memory.md): the CUDA context (driver, kernels' code,
// lazy-loaded modules) and NCCL's buffers, which every communicator allocates with
// cudaMalloc/cuMem for its channels and peers. Profile keys under "memory_outside_allocator",
// each with a source. cuBLAS's workspaces are described here too although they are not outside:
// PyTorch takes them from the caching allocator (aten/src/ATen/cuda/CublasHandlePool.cpp,
// getNewWorkspace), so the engine allocates them there (reserved and allocated both count them).
struct OutsideAllocatorMemory {
  Bytes cuda_context;
  Bytes nccl_per_communicator;  // measured; when set it replaces the channel model below
  int nccl_channels = 0;        // NCCL's collective channels per communicator; 0: not modelled
  Bytes cublas_workspace;       // one cuBLAS workspace (per handle and stream that runs GEMMs)
  bool operator==(const OutsideAllocatorMemory&) const = default;
};

// NCCL's buffers per channel of a ring connection, one per protocol (NVIDIA/nccl src/init.cc
// l.810-813 at 5067397c, v2.30.7; unchanged since the LL128 protocol came in 2.4):
//   LL     = NCCL_LL_LINES_PER_THREAD (8) x NCCL_LL_MAX_NTHREADS (512) x NCCL_STEPS (8)
//            x sizeof(union ncclLLFifoLine) (16)                      =   524,288 B
//   LL128  = NCCL_LL128_ELEMS_PER_THREAD (120) x NCCL_LL128_MAX_NTHREADS (640) x NCCL_STEPS (8)
//            x sizeof(uint64_t) (8)                                   = 4,915,200 B
//   Simple = DEFAULT_BUFFSIZE (1 << 22, NCCL_BUFFSIZE)                = 4,194,304 B
// (src/include/device.h l.26, 75, 97-98, 114-115). A ring keeps one receive connection per
// channel with these buffers whatever the group size ("Ring uses a limited amount of memory as
// it only has 2 connections regardless of the scale", NVIDIA/nccl#864).
inline constexpr std::int64_t kNcclLlBuffSize = 8 * 512 * 8 * 16;
inline constexpr std::int64_t kNcclLl128BuffSize = 120 * 640 * 8 * 8;
inline constexpr std::int64_t kNcclSimpleBuffSize = std::int64_t{1} << 22;
inline constexpr std::int64_t kNcclBuffersPerChannel = kNcclLlBuffSize + kNcclLl128BuffSize + kNcclSimpleBuffSize;


struct HardwareProfile {
  std::string name;
  std::string description;
  Bytes memory_capacity;
  ComputeProfile compute;
  ScopeModel intra_node;
  ScopeModel inter_node;
  // When set, every communicator is priced by this model and intra_node/inter_node are unused.
  std::optional<NcclTopology> topology;
  ContentionProfile contention;
  HostProfile host;
  OutsideAllocatorMemory outside_allocator;
  RankVariation rank_variation;
  nlohmann::json sources;     // JSON path of a number -> where it came from
  nlohmann::json provenance;  // how the profile was produced (commands, inputs, fit quality)

  // Memory outside the caching allocator for a rank in `communicators` NCCL communicators of
  // more than one rank, by component (empty: none).
  std::vector<NonPytorchPart> non_pytorch_parts(std::size_t communicators) const;
  Bytes non_pytorch_memory(std::size_t communicators) const {
    Bytes total;
    for (const auto& p : non_pytorch_parts(communicators)) total += p.bytes;
    return total;
  }
  bool operator==(const HardwareProfile&) const = default;
};

class GemmTimeMemo;
// The GEMM-time memo of `p`, a profile that is never changed (one a cache made const): one per
// object while it lives, shared by every experiment that holds it (compute_model.cpp).
std::shared_ptr<GemmTimeMemo> gemm_time_memo_of(const std::shared_ptr<const HardwareProfile>& p);

// A profile held by an experiment: shared, not copied, by the experiments that read the same
// file (the process keeps what it read, load_shared_profile; a copy of a profile is ~700 heap
// allocations, its sources and provenance, 40 % of a simulate call's). Reads as a const pointer
// or, converted, as a `const HardwareProfile&`; edit() gives a copy of its own to change.
class SharedProfile {
 public:
  SharedProfile() : SharedProfile(HardwareProfile{}) {}
  SharedProfile(HardwareProfile p)  // NOLINT: a profile where one is expected
      : p_(std::make_shared<HardwareProfile>(std::move(p))), own_(true) {}
  // `p` must be a profile no one changes (the process's and a sweep's caches hold theirs const):
  // its GEMM times are then kept across simulations (gemm_time_memo).
  SharedProfile(std::shared_ptr<const HardwareProfile> p)  // NOLINT: as above
      : p_(std::move(p)), memo_(gemm_time_memo_of(p_)) {}

  const HardwareProfile& operator*() const { return *p_; }
  const HardwareProfile* operator->() const { return p_.get(); }
  operator const HardwareProfile&() const { return *p_; }  // NOLINT: reads as the profile

  // The profile to change: this holder's own copy, made unless it already has one that no
  // other holder shares.
  HardwareProfile& edit() {
    if (!own_ || p_.use_count() != 1) {
      p_ = std::make_shared<HardwareProfile>(*p_);
      own_ = true;
    }
    memo_.reset();  // its GEMM times may change
    return const_cast<HardwareProfile&>(*p_);  // made non-const above: own_
  }

  // The GEMM times simulations of this profile keep for each other (issue 49: each priced its
  // few dozen shapes again, scanning the measured table, ~7 % of a sweep point); none for a
  // profile this holder made or edits.
  GemmTimeMemo* gemm_time_memo() const { return memo_.get(); }

 private:
  std::shared_ptr<const HardwareProfile> p_;
  std::shared_ptr<GemmTimeMemo> memo_;
  bool own_ = false;  // p_ was made here as a (non-const) HardwareProfile
};

class ObjectReader;
// Parses a profile object; errors name `file` and the JSON path.
HardwareProfile parse_profile(ObjectReader& reader);
// The profile in `file` (its includes merged), parsed or from the disk cache; a process keeps
// the last eight it read and returns one again while its files are unchanged (profile_io.cpp).
HardwareProfile load_profile(const std::filesystem::path& file);
std::shared_ptr<const HardwareProfile> load_shared_profile(const std::filesystem::path& file);
nlohmann::json profile_to_json(const HardwareProfile& p);

// Where a prediction's GEMM rates come from, for the result JSON and the text reports: the
// table's kind (or the roofline without one), the in-training factor and the peak scaling
// applied to it, and a one-line statement. `corrected` is false for an uncorrected
// microbenchmark table (factor 1), which predicts GEMMs faster than a training step runs them.
struct GemmRateSource {
  std::string table;  // "microbenchmark", "in_training", "none" (roofline)
  double in_training_factor = 1;
  double peak_scale = 1;
  bool corrected = true;
  std::string text;
};
GemmRateSource gemm_rate_source(const ComputeProfile& c);

}  // namespace stepsim
