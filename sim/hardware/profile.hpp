#pragma once
// A hardware profile: every cost constant the simulator uses, each traceable to a source
// (datasheet, a log in ../shared/data, or a calibration run recorded under "provenance").
// The JSON format is documented in README.md ("Hardware profiles").

#include <filesystem>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/core/units.hpp"
#include "sim/program/program.hpp"

namespace stepsim {

// t = alpha + S / beta for S <= max_bytes (raw alpha-beta; S per the nccl-tests convention).
struct AlphaBetaRange {
  Bytes max_bytes{std::numeric_limits<std::int64_t>::max()};
  Time alpha;
  Bandwidth beta;
};

// A measured point: S bytes (nccl-tests convention) took `time` on a group of `ranks`.
struct MeasuredCollective {
  Bytes bytes;
  Time time;
};

enum class CollectiveModelKind { AlphaBeta, Ring, Tree, Nccl, Table };
std::string to_string(CollectiveModelKind k);

// The collective model of one scope (intra-node or inter-node).
struct ScopeModel {
  CollectiveModelKind kind = CollectiveModelKind::Ring;
  // alpha_beta: ranges per collective kind; kinds not listed use `default_ranges`.
  std::map<CollectiveKind, std::vector<AlphaBetaRange>> alpha_beta;
  std::vector<AlphaBetaRange> default_ranges;
  // Group size each kind's ranges were measured on ("ranks": {"all_reduce": 16}). A
  // communicator of another size rescales the bandwidth term by the busbw factor ratio
  // factor(n) / factor(ranks), which is what carries across group sizes (C6.1). Kinds not
  // listed are used as measured, whatever the group size (raw alpha-beta, the textbook form).
  std::map<CollectiveKind, int> alpha_beta_ranks;
  // Ranges measured on further group sizes of the same scope ("groups": {"all_reduce": {"2":
  // [...], "4": [...]}}), for kinds listed in alpha_beta_ranks. A communicator uses the ranges
  // of the measured group size nearest its own (exact when measured), rescaled as above.
  std::map<CollectiveKind, std::map<int, std::vector<AlphaBetaRange>>> alpha_beta_groups;
  // ring / tree / nccl (C6.2-C6.4): per-step latency, bus bandwidth, fixed base latency.
  Bandwidth busbw;
  Time step_latency;
  Time base_latency;
  Bandwidth tree_busbw;          // 0 -> busbw
  Time tree_step_latency;        // per tree level
  // table: measured points per kind and group size (sorted by bytes).
  std::map<CollectiveKind, std::map<int, std::vector<MeasuredCollective>>> table;
};

struct GemmMeasurement {
  GemmShape shape;
  FlopRate rate;   // measured FLOP/s
};

struct ComputeProfile {
  std::map<Dtype, FlopRate> peak;     // dense peak per dtype
  Bandwidth hbm;                      // datasheet HBM bandwidth
  double memory_efficiency = 0.8;     // fraction of `hbm` reached by memory-bound kernels
  double gemm_efficiency = 0.7;       // roofline fallback: fraction of peak without a table entry
  double attention_efficiency = 0.5;  // fraction of peak for attention FLOPs (flash attention)
  // Fraction of peak of the memory-efficient sdpa kernel; 0 = attention_efficiency.
  double efficient_attention_efficiency = 0;
  // GEMMs inside a training step reach less than in an isolated microbenchmark (clocks under
  // power limits, cold caches, SMs taken by NCCL): achieved / microbenchmark rate, applied to
  // table lookups. 1 = the table is used as measured; "gemm_rate_source" says which was used.
  double gemm_in_training_factor = 1.0;
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
};

// Fluid contention: while a collective and a compute kernel overlap, the kernel runs at
// 1/(1+compute_slowdown) of its solo rate and the collective at 1/(1+comm_slowdown).
struct ContentionProfile {
  double compute_slowdown = 0;
  double comm_slowdown = 0;
};

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
  Time collective_overhead;  // per Collective (c10d + NCCL enqueue)
  Time event_overhead;       // per Record / Wait
  Time alloc_overhead;       // per Alloc / Free
};

struct HardwareProfile {
  std::string name;
  std::string description;
  Bytes memory_capacity;
  ComputeProfile compute;
  ScopeModel intra_node;
  ScopeModel inter_node;
  ContentionProfile contention;
  HostProfile host;
  nlohmann::json sources;     // JSON path of a number -> where it came from
  nlohmann::json provenance;  // how the profile was produced (commands, inputs, fit quality)
};

class ObjectReader;
// Parses a profile object; errors name `file` and the JSON path.
HardwareProfile parse_profile(ObjectReader& reader);
HardwareProfile load_profile(const std::filesystem::path& file);
nlohmann::json profile_to_json(const HardwareProfile& p);

}  // namespace stepsim
