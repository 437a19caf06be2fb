#pragma once
// Kernel cost: GEMMs from a measured efficiency table (nearest shapes, interpolated) with a
// roofline fallback; memory-bound bytes at the calibrated HBM rate; attention FLOPs at a
// calibrated fraction of peak; fixed times as given.

#include <map>

#include "sim/hardware/profile.hpp"
#include "sim/program/program.hpp"

namespace stepsim {

Time gemm_time(const ComputeProfile& c, const GemmShape& g);
Time memory_time(const ComputeProfile& c, Bytes bytes);
Time kernel_time(const ComputeProfile& c, const KernelWork& w);

// kernel_time with GEMM times memoized per shape. The measured-table lookup scans every table
// entry (a fitted H100 profile holds ~1,100), while a step repeats a few dozen shapes
// thousands of times; one cache per simulation keeps the engine at microseconds per kernel.
class KernelTimeCache {
 public:
  explicit KernelTimeCache(const ComputeProfile& c) : c_(c) {}
  Time kernel_time(const KernelWork& w);

 private:
  const ComputeProfile& c_;
  std::map<GemmShape, Time> gemm_;
};

}  // namespace stepsim
