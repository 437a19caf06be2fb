#pragma once
// Lookups over a read trace that the analysis and the fit extraction share: the launch of a GPU
// op (by correlation id), the step it belongs to, the CPU spans enclosing a launch on its
// thread (communication ops, GEMM ops), per-step phase markers, memory samples by device.

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "trace/kineto_trace.hpp"
#include "trace/trace_analysis.hpp"

namespace stepsim::trace {

class TraceIndex {
 public:
  // Borrows `t`, which must outlive the index.
  explicit TraceIndex(const KinetoTrace& t);

  // Step spans sorted by start; one per ProfilerStep number (the first if repeated).
  const std::vector<const CpuSpan*>& steps() const { return steps_; }
  const RuntimeCall* launch_of(const GpuOp& op) const;
  // When the op was launched (its runtime call's start), or its GPU start without one.
  Time anchor(const GpuOp& op) const;
  // Index into steps() of the span containing anchor(op).
  std::optional<std::size_t> step_of(const GpuOp& op) const;
  // Index into steps() of the span containing `t` (adjacent spans: the later one).
  std::optional<std::size_t> step_at(Time t) const;
  // Phase of an op launched at `anchor` in step `step` from the CPU markers (see header rules).
  Phase kineto_phase(std::size_t step, Time anchor) const;
  // Phase of an op of step `step`: its args.phase (stepsim traces), else kineto_phase.
  Phase phase_of(std::size_t step, const GpuOp& op) const;
  // Spans of `kind` on `thread` containing `t`, innermost (latest start) first.
  std::vector<const CpuSpan*> enclosing(CpuSpan::Kind kind, std::int64_t thread, Time t) const;
  // Samples of `device` with start <= time <= end, in time order.
  std::vector<const MemSample*> memory_in(int device, Time start, Time end) const;
  // Kind, dtype, group size and S of collective kernel gpu_ops[op].
  CollectiveRecord resolve_collective(std::size_t op) const;

 private:

  const KinetoTrace& t_;
  // Indices into t_.runtime by (correlation, index): 4 bytes a call, where a hash map took ~20
  // (a 1 GB trace has 330,000 runtime calls); launch_of finds the first of a correlation id.
  std::vector<std::uint32_t> launch_;
  std::vector<const CpuSpan*> steps_;
  std::vector<Time> bwd_start_, opt_start_;               // per step; infinite if none
  std::map<std::pair<int, std::int64_t>, std::vector<const CpuSpan*>> spans_;  // (kind, thread)
  std::map<int, std::vector<const MemSample*>> memory_;   // device -> samples by time
};

}  // namespace stepsim::trace
