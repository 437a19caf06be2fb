#pragma once
// `stepsim analyze`: the DESIGN.md section 5 metrics measured on a real (Kineto) trace, or on a
// trace written by `stepsim simulate --trace`.
//
// Rules (also in docs/analyze.md):
//  - Steps are the `ProfilerStep#N` CPU spans; step_time is the span's duration.
//  - A GPU op belongs to the step whose span contains the start of the CUDA runtime call that
//    launched it (matched by correlation id); ops without a launch record (stepsim traces, lost
//    runtime events) belong to the step whose span contains their GPU start.
//  - compute = kernels that are not collectives; comm = NCCL kernels (by name) and ops with
//    args.stepsim_op == "collective"; memcpy/memset are neither (as in HTA).
//  - The metrics of a step come from overlap_metrics() over its ops in the window
//    [min(span start, first op start), max(span end, last op end)] (no op is clipped), with
//    step_time = the span's duration and idle = max(0, step_time - |compute U comm|).
//  - Phases: args.phase when the trace has it (stepsim); otherwise an op launched before the
//    step's first autograd::engine::evaluate_function is forward, before its first
//    Optimizer.step# is backward, later optimizer. Phase ends (GPU times) are taken back by the
//    step's lag (its last kernel's end past the span's end, if any), then clamped to the span.
//  - Peak memory: the highest "[memory]" Total Allocated (CUDA, the rank's device) or stepsim
//    counter sample inside the span; 0 when the trace has none. Its phase is the host's at the
//    sample (the CPU-marker rule above at the sample's time; a stepsim trace: the phase of the
//    last op issued at or before it), as sim/analysis/metrics.hpp defines it.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trace/kineto_trace.hpp"
#include "sim/analysis/class_breakdown.hpp"
#include "sim/analysis/metrics.hpp"

namespace stepsim::trace {

struct AnalyzeOptions {
  std::optional<std::int64_t> first_step, last_step;  // ProfilerStep numbers, inclusive
  int top_exposed = 10;
};
// "3-5", "7", "3-" or "-5"; throws InputError.
void parse_step_range(const std::string& text, AnalyzeOptions& o);

// One collective kernel with its parameters resolved.
struct CollectiveRecord {
  std::size_t op = 0;           // index into KinetoTrace::gpu_ops
  std::int64_t step = 0;        // ProfilerStep number
  TraceCollective kind = TraceCollective::Unknown;
  std::string dtype;
  int group_size = 0;
  bool group_assumed = false;   // group size not in the trace: world size assumed
  Bytes bytes{-1};              // S per the nccl-tests convention; -1 = unknown
  Time start, duration, exposed;
  std::string source;           // where the parameters came from
};

struct StepAnalysis {
  std::int64_t number = 0;
  Time span_start, span_end;
  // The end of the last kernel launched in the step: past span_end when the GPU runs behind the
  // host, so compute and comm (measured to here) can exceed step_time (issue 50, F21).
  Time kernels_end;
  Metrics metrics;
  std::size_t kernels = 0, collectives = 0, memory_ops = 0;
  Time memory_op_time;  // union of memcpy/memset intervals (reported, not part of the metrics)
  // Time and kernel count per simulator kernel class (trace_kernel_class), communication, idle.
  ClassBreakdown classes;
};

// The simulator's kernel class of a CUDA kernel, from its name: the PyTorch/library kernel
// families each class stands for (program.hpp KernelClass): cuBLAS/CUTLASS (and cuBLAS's Hopper
// nvjet kernels, modded-nanogpt's Triton matmuls) -> gemm,
// flash/fmha -> attention, vectorized_elementwise/fused_dropout/nvfuser/triton -> elementwise,
// elementwise_kernel/unrolled_elementwise (TensorIterator's non-vectorized path) ->
// elementwise_strided, softmax/reduce/nll_loss -> reduction, layer_norm/apex LayerNorm/rms ->
// norm, CatArrayBatchedCopy -> copy, index_select/embedding backward/cub sort -> embedding,
// multi_tensor_apply/adam -> optimizer; anything else -> compute.
KernelClass trace_kernel_class(const std::string& kernel_name);

// trace_kernel_class of a trace's GPU ops, each distinct name classified once: a trace repeats a
// few hundred kernel names, and classifying one lower-cases it and searches it for some forty
// substrings (a tenth of analyze's time before). Borrows `t`, which must outlive it.
class KernelClassOfName {
 public:
  explicit KernelClassOfName(const KinetoTrace& t) : t_(t), cls_(t.names.size(), kUnknown) {}
  KernelClass operator()(const GpuOp& op) {
    std::uint8_t& c = cls_[static_cast<std::size_t>(op.name)];
    if (c == kUnknown) c = static_cast<std::uint8_t>(trace_kernel_class(t_.name_of(op)));
    return static_cast<KernelClass>(c);
  }

 private:
  static constexpr std::uint8_t kUnknown = 0xff;
  const KinetoTrace& t_;
  std::vector<std::uint8_t> cls_;  // by KinetoTrace::names index
};

// A row of the collective table: one (kind, group, S) class.
struct CollectiveRow {
  TraceCollective kind = TraceCollective::Unknown;
  int group_size = 0;
  bool group_assumed = false;
  Bytes bytes{-1};
  std::string dtype;
  std::size_t count = 0;
  Time median, min, max, total;
  double algbw_gbps = 0, busbw_gbps = 0;  // from the median; 0 when S is unknown
};

struct TraceAnalysis {
  std::string file;
  int rank = -1, world_size = 0;
  std::string device;
  std::size_t steps_in_trace = 0;
  std::optional<std::int64_t> first_step_in_trace, last_step_in_trace;  // ProfilerStep numbers, all steps
  std::vector<StepAnalysis> steps;  // the selected steps, by number
  Metrics mean;
  std::vector<CollectiveRecord> collectives;  // of the selected steps, in start order
  std::vector<CollectiveRow> table;
  std::vector<CollectiveRecord> top_exposed;
  std::size_t unattributed_gpu_ops = 0;       // outside every step span
};

TraceAnalysis analyze_trace(const KinetoTrace& t, const AnalyzeOptions& o);

// Mean of integer fields (rounded to ns / bytes); overlap_pct = sum overlapped / sum comm;
// peak memory = the highest step's peak (with its breakdown, time, phase).
Metrics mean_metrics(const std::vector<Metrics>& v);

struct StragglerRow {
  std::int64_t step = 0;
  Time min_step, max_step;
  int slowest_compute_rank = -1;   // the rank with the most compute: the likely straggler
  Time compute_spread;             // max - min compute_time over ranks
  int least_exposed_rank = -1;     // the rank that waited least on communication
};

// The wait for the slowest rank at one step's collectives, measured across the traced ranks:
// what `simulate` reports as the slowest-rank wait (metrics.rank_wait_ns), the latest arrival
// minus the mean arrival at each collective, summed. A step counts where every rank ran the same
// collectives (kind, dtype, S) in the same order. Each rank's clock is aligned on the step's
// collectives' ends (the median of its kernel ends minus the first rank's): the ranks of one
// collective finish it together, while their host clocks may differ by more than the waits.
struct RankWaitRow {
  std::int64_t step = 0;
  std::size_t collectives = 0;  // matched on every rank
  Time wait;                    // summed over them: latest arrival - mean arrival
  Time largest_wait;            // the largest one's
  std::size_t largest_index = 0;  // its place among the step's collectives
  TraceCollective largest_kind = TraceCollective::Unknown;
  Bytes largest_bytes{-1};
  Time end_spread;              // median over the collectives of (latest - earliest aligned end)
};

struct JobAnalysis {
  std::vector<TraceAnalysis> ranks;                     // sorted by rank
  std::vector<std::pair<std::int64_t, Metrics>> steps;  // per step number, mean over ranks
  Metrics mean;
  std::vector<StragglerRow> stragglers;                 // steps present in every trace
  std::vector<RankWaitRow> rank_waits;                  // steps whose collectives match on every trace
};

JobAnalysis analyze_job(const std::vector<KinetoTrace>& traces, const AnalyzeOptions& o);

// {"schema": "stepsim.analyze/1", "traces": [...], "steps": [...], "mean": {...}, ...}
nlohmann::json job_to_json(const JobAnalysis& job);
// The readable report.
std::string job_to_text(const JobAnalysis& job);

}  // namespace stepsim::trace
