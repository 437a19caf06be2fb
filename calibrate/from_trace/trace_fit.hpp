#pragma once
// Calibration data from a profile of the user's own job (`stepsim fit --trace TRACE...`):
// measured collective points (kind, group size, S per nccl-tests, time) and compute timings
// (per kernel class, and GEMMs with their shapes where the trace recorded shapes). The
// calibration engineer's `fit` turns these into a HardwareProfile; collective_table() and
// gemm_table() already give the profile's own shapes (TableModel::points, ComputeProfile::gemm_table).
// See /work/notes/trace-fit-api.md.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "calibrate/fit/profile_fit.hpp"
#include "trace/kineto_trace.hpp"
#include "trace/trace_analysis.hpp"
#include "sim/analysis/idle.hpp"
#include "sim/hardware/profile.hpp"

namespace stepsim::trace {

// One collective kernel of a selected step.
struct TraceCollectivePoint {
  CollectiveKind kind = CollectiveKind::AllReduce;
  int ranks = 0;               // group size
  bool ranks_assumed = false;  // not in the trace: distributedInfo.world_size assumed
  Bytes bytes;                 // S, nccl-tests convention (as in Collective::bytes)
  Time time;                   // kernel duration on the GPU
  std::string dtype;           // canonical ("bf16", "fp32", ...)
  std::string group;           // process group name when recorded
  int rank = -1;               // the trace's rank
  std::int64_t step = 0;
  // A scalar collective (<= 8 bytes: one fp32/fp64 value): the grad-norm / overflow all-reduce
  // whose result the host reads at once (DeepSpeed stage_1_and_2.py get_grad_norm_direct ->
  // .item()). Its kernel time is dominated by the ranks arriving at different times after the
  // host sync, not by NCCL latency: left out of the latency fit.
  bool host_synchronised = false;
  // The part of the kernel's time that compute kernels of the same device covered (1 - exposed
  // / duration): the contention split of comm_slowdown.
  double overlapped_fraction = 0;
};

struct KernelClassTiming {
  std::string cls;     // "gemm", "conv", "attention", "elementwise", "reduction", "optimizer", "memcpy", ...
  std::size_t count = 0;
  Time total, median;
};

// A GEMM kernel (or the kernels of one aten::mm/addmm/bmm/baddbmm call, summed) with its shape.
struct GemmPoint {
  GemmShape shape;
  std::size_t count = 0;  // calls of this shape
  Time median;            // median time of one call (calls without a concurrent NCCL kernel when any)
  FlopRate rate;          // shape.flops() / median: the in-training rate of this shape
  std::size_t overlapped = 0;  // calls that ran beside an NCCL kernel
  Time median_overlapped;      // their median time (0 if none)
  // > 1 when every call ran beside NCCL: `rate` is the overlapped one times this (the measured
  // compute slowdown, or the SM share), the solo rate the engine slows again.
  double solo_correction = 1.0;
};

// The kernels of one fused attention call (a flash_attn autograd function, or PyTorch sdpa's
// flash / memory-efficient op) by direction and shape: the kernel's in-training rate. FLOPs are
// the causal count (2 b s^2 h forward, 5 b s^2 h backward; twice that without a causal mask).
struct AttentionPoint {
  AttentionKernel kernel = AttentionKernel::Flash;
  bool backward = false;
  std::int64_t batch = 0, seq = 0, hidden = 0;  // hidden = heads x head dim of q
  std::int64_t head_dim = 0;                    // q's last dimension; 0: not known
  bool causal = true;
  bool causal_assumed = false;  // the kernel names did not say: causal taken
  std::size_t count = 0;
  Time median;                  // median time of one call's kernels
  FlopRate rate;                // the FLOPs the kernel executes (attention_executed_flops) over median
};

// Eager PyTorch's CPU cost per op, from the spacing of kernel launches (runtime calls) on the
// host threads: the autograd engine's thread (the one running autograd::engine spans) gives the
// backward cost, the busiest other thread the forward cost. Medians of the intervals below 1 ms
// between consecutive launches on a thread, and of the runtime calls' own durations.
struct HostDispatchFit {
  Time eager_op, autograd_op, kernel_launch;
  std::size_t forward_launches = 0, backward_launches = 0;
  // The training loop's host time around the framework (HostProfile::step_start / step_end):
  // medians over the selected steps of (first GPU op's start - ProfilerStep start) and
  // (ProfilerStep end - last GPU op's end, 0 when the host ended first), on the main device.
  Time step_start, step_end;
  std::size_t steps = 0;
  // What the host ran in them (analyze --idle's head and tail frames, the mean per step over
  // the traces and steps, largest first): the script's own work a what-if of another script may
  // not have (DeepSpeed-Chat's per-step parameter count and logging, a DataLoader).
  std::vector<HostFrame> step_start_frames, step_end_frames;
  // DeepSpeed's monitor write (HostProfile::monitor_write): the median duration of the
  // MonitorMaster.write_events calls in the selected steps (a trace with Python stacks).
  Time monitor_write;
  std::size_t monitor_writes = 0;
  // The autograd engine's start per graph node (HostProfile::autograd_engine_per_node): per
  // backward call in the selected steps (CpuSpan::Kind::RunBackward, a trace with Python stacks),
  // the time from run_backward's start to the first evaluate_function over the evaluate_function
  // spans inside the call; the median over the calls.
  Time autograd_engine_per_node;
  std::size_t backward_calls = 0;
};

// A memory-bound kernel class as the trace's kernels ran it: the bytes their ops' shapes say
// they moved (memory_op_bytes) over the time they took, summed over the class's kernels that an
// op with known traffic launched alone, ran >= 20 us and ran beside no NCCL kernel. Bytes over
// time, not a median of rates: a prediction of the same ops at this rate takes the measured time.
// The time per element of the non-vectorized path (ComputeProfile::strided_element_ns) comes
// from the kernels it binds: those moving at most kElementBoundBytes per element (2-byte
// operands; an fp32 or fp64 kernel is held by its bytes and would price bf16 ones too high).
// Those whose operands' dtypes differ (a bf16 tensor against a float one) cast every element
// and are timed apart (strided_cast_element_ns). The rest, the byte-bound ones, measure the
// class's bytes per second: a bandwidth taken over the element-bound kernels too would make
// their bytes, not their elements, price them (a bf16 add moving 6 bytes per element in the
// time a transposing copy moves 4).
inline constexpr double kElementBoundBytes = 6;
// Element-bound kernels of one kind: how many, their elements and time, time over elements.
struct ElementTiming {
  std::size_t count = 0;
  std::int64_t elements = 0;
  Time time;
  double ns_per_element = 0;
};
// One kernel of a memory-bound class: its op's bytes, its time and the op's largest tensor.
struct MemoryKernel {
  std::int64_t bytes = 0;
  Time time;
  std::int64_t largest = 0;
};
struct MemoryClassPoint {
  KernelClass cls = KernelClass::Elementwise;  // as analyze classes the kernel's name
  std::size_t count = 0;                       // kernels
  Bytes bytes;
  Time time;
  Bandwidth rate;
  ElementTiming plain;  // kernels of at most kElementBoundBytes per element, one input dtype
  ElementTiming cast;   // the same with mixed-dtype tensor inputs
  Bytes byte_bound_bytes;     // the other kernels (more bytes per element, or no element count):
  Time byte_bound_time;       // their bytes and time
  Bandwidth byte_bound_rate;  // bytes over time
  // Every kernel counted: the elementwise ones over tensors larger than the base profile's L2
  // measure the DRAM streaming rate (ComputeProfile::dram_stream, apply_trace_compute).
  std::vector<MemoryKernel> kernels;
};

struct TraceFitData {
  std::vector<TraceCollectivePoint> collectives;
  std::size_t skipped_collectives = 0;  // send/recv, unknown kind, or unknown size
  std::vector<KernelClassTiming> kernel_classes;  // sorted by class name
  std::vector<GemmPoint> gemms;                   // sorted by shape
  std::vector<AttentionPoint> attention;          // sorted by kernel, direction, shape
  std::vector<MemoryClassPoint> memory_classes;   // elementwise, strided, reduction, norm: those measured
  // The reductions torch.compile generated (is_inductor_reduction_name), their arguments' bytes
  // and time each: apply_trace_compute's compute.memory_bandwidth_GBps.inductor_reduction.
  // Inductor's kernels count in no class above.
  std::vector<MemoryKernel> inductor_reductions;
  std::vector<MemoryKernel> inductor_pointwise;  // triton_poi_*: reported, not fitted (elementwise prices them)
  HostDispatchFit host;
  // Contention: median over GEMM shapes seen at least 3 times both alone and beside an NCCL
  // kernel of (median overlapped / median alone) - 1; 0 with no such shape.
  double compute_slowdown = 0;
  std::size_t contention_shapes = 0;
  // The collectives' side: per (kind, group, size) seen at least 3 times alone (< 5 % covered by
  // compute) and 3 times beside compute (>= 50 %), (median beside / median alone - 1) / the
  // median covered fraction beside (the engine slows a collective only while a kernel runs);
  // the median over such keys, 0 with none.
  double comm_slowdown = 0;
  std::size_t comm_contention_keys = 0;
  // The SMs a collective holds: deviceProperties numSms of the main device, and the median CTAs
  // (args.grid) of its NCCL kernels of at least 100 us (the bulk transfers; a 4-byte all-reduce
  // runs one CTA); 0 when the trace does not record them.
  int gpu_sms = 0;
  int collective_sms = 0;
  std::size_t collective_grid_kernels = 0;
  // Both counts recorded and a collective leaving SMs to compute: what the resource model needs.
  bool sm_counts_usable() const { return gpu_sms > 0 && collective_sms > 0 && collective_sms < gpu_sms; }
};

// Kernel class from a CUDA kernel name (heuristic on library naming: cutlass/xmma/gemm ->
// gemm, cudnn/conv/implicit_gemm fprop/dgrad/wgrad -> conv, flash/fmha -> attention, ...).
std::string kernel_class_of(const std::string& kernel_name);

// Everything of the steps selected by `o` in every trace. Throws InputError as analyze does.
TraceFitData extract_fit_data(const std::vector<KinetoTrace>& traces, const AnalyzeOptions& o);

// Median time per (kind, group size, S): TableModel::points' shape, points sorted by bytes.
// Points whose group size was assumed are left out unless `include_assumed_groups`.
std::map<CollectiveKind, std::map<int, std::vector<MeasuredCollective>>> collective_table(
    const TraceFitData& d, bool include_assumed_groups);

// One GemmMeasurement per shape (median rate): ComputeProfile::gemm_table's shape.
std::vector<GemmMeasurement> gemm_table(const TraceFitData& d);

// How trace measurements become fit inputs (`stepsim fit --trace` and its flags).
struct TraceFitOptions {
  // Keep collectives whose group size the trace does not record, taking the world size.
  bool keep_assumed_groups = false;
  // > 0: the size of every group the trace does not record (the user's job layout, e.g.
  // Megatron's tensor- and data-parallel groups of 2); an all-gather's S, taken from the per-rank
  // input times the assumed world, is rescaled to this group.
  int group_size = 0;
  // The fastest occurrence per size instead of the median: a collective kernel on one rank runs
  // from that rank's launch until every rank has arrived, so the minimum over ranks and steps is
  // the occurrence least inflated by waiting for the last rank.
  bool use_min = false;
  int gpus_per_node = 8;        // a group larger than this spans nodes
};

// The fit inputs of `stepsim fit --trace` (and of validate's cross-predictions and init): one
// series per (collective, group size of at least 2) with one time per message size, and one GEMM
// sample per shape. `label` names the source in the fit's provenance.
calib::FitInputs fit_inputs(const TraceFitData& d, const std::string& label, const TraceFitOptions& o);

// The compute/host side of a trace fit into `p`: eager dispatch costs from the launch spacing,
// the compute slowdown beside NCCL kernels, the GEMM table taken as in-training rates, and each
// fused attention kernel seen in both directions as its compute.attention rate (the measured
// fraction of peak at the trace's sequence length, carried to long sequences by the base
// profile's half_rate_seq), and each memory-bound class measured over at least 8 kernels and
// 1 ms as its compute.memory_bandwidth_GBps; what was fitted goes to provenance["trace_compute"].
// With GEMMs measured, provenance["trace_compute"]["gemm_vs_base"] holds how fast they ran
// against what `base` (the profile before the fit) prices them at (gemm_rates_against_base).
void apply_trace_compute(const TraceFitData& d, const ComputeProfile& base, HardwareProfile& p, nlohmann::json& provenance);

// The trace's GEMMs against the rates `base` gives the same shapes (its table or roofline, its
// in-training factor and peak scale applied): per shape measured rate / base rate, summarised
// as shapes, calls, median, min, max and the ratio of the summed times (base over measured,
// weighted by each shape's calls), with what the base's rates are. An H100 trace against the
// shipped H100 profile says how far its microbenchmark table is from a training step's GEMMs.
// Against a base with compute.clock (its table measured at boost_MHz), also "implied_clock": the
// clock the GEMMs ran at (time-weighted) and the full_load_MHz it implies (median over shapes).
nlohmann::json gemm_rates_against_base(const TraceFitData& d, const ComputeProfile& base);

// What `fit --trace` and `init --from-trace` print of the comparison with the base profile: a
// line for the GEMMs (provenance trace_compute.gemm_vs_base) and one for the memory-bound
// classes measured (memory_bandwidth_GBps.<class>.GBps and base_GBps); none for what is absent.
std::vector<std::string> against_base_summary(const nlohmann::json& trace_compute);

// Everything `fit --trace` takes from traces: the trace data (for the compute/host fit) and the
// collective and GEMM fit inputs, with every trace file in the inputs' provenance.
struct TraceCalibration {
  TraceFitData data;
  calib::FitInputs inputs;
};
TraceCalibration trace_calibration(const std::vector<KinetoTrace>& traces, const std::vector<std::string>& files,
                                   const AnalyzeOptions& o, const TraceFitOptions& fo);

// `base` refitted from traces alone, as `fit --trace` does: the collective/GEMM fit, then the
// compute/host side (apply_trace_compute); the provenance lands in `report`.
HardwareProfile refit_from_traces(const HardwareProfile& base, const TraceCalibration& c, const calib::FitOptions& fo,
                                  calib::FitReport& report);

}  // namespace stepsim::trace
