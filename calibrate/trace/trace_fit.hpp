#pragma once
// Calibration data from a profile of the user's own job (`stepsim fit --trace TRACE...`):
// measured collective points (kind, group size, S per nccl-tests, time) and compute timings
// (per kernel class, and GEMMs with their shapes where the trace recorded shapes). The
// calibration engineer's `fit` turns these into a HardwareProfile; collective_table() and
// gemm_table() already give the profile's own shapes (ScopeModel::table, ComputeProfile::gemm_table).
// See /work/notes/trace-fit-api.md.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "calibrate/fit/profile_fit.hpp"
#include "calibrate/trace/kineto_trace.hpp"
#include "calibrate/trace/trace_analysis.hpp"
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
  Time median;            // median time of one call
  FlopRate rate;          // shape.flops() / median
};

struct TraceFitData {
  std::vector<TraceCollectivePoint> collectives;
  std::size_t skipped_collectives = 0;  // send/recv, unknown kind, or unknown size
  std::vector<KernelClassTiming> kernel_classes;  // sorted by class name
  std::vector<GemmPoint> gemms;                   // sorted by shape
};

// Kernel class from a CUDA kernel name (heuristic on library naming: cutlass/xmma/gemm ->
// gemm, cudnn/conv/implicit_gemm fprop/dgrad/wgrad -> conv, flash/fmha -> attention, ...).
std::string kernel_class_of(const std::string& kernel_name);

// Everything of the steps selected by `o` in every trace. Throws InputError as analyze does.
TraceFitData extract_fit_data(const std::vector<KinetoTrace>& traces, const AnalyzeOptions& o);

// Median time per (kind, group size, S): ScopeModel::table's shape, points sorted by bytes.
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

}  // namespace stepsim::trace
